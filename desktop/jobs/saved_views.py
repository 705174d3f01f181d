"""Saved views: named filters of the job table, kept per connection profile in the user's
settings (beside the column choices), so that production keeps its own views.

A view holds the filter as the user set it: the status buttons, the type, pipeline and user
fields, the time range and the search text. "Save view…" names the current one; the Views
button lists them to pick one, and to delete one."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QComboBox, QInputDialog, QLineEdit, QMenu, QToolButton, QWidget

from jobdesk.console.column_prefs import console_settings

MAX_NAME = 80


class FilterFields(Protocol):
    """The job table's filter fields (the Jobs tab)."""

    @property
    def status_buttons(self) -> dict[Any, Any]: ...
    @property
    def type_edit(self) -> QLineEdit: ...
    @property
    def pipeline_edit(self) -> QLineEdit: ...
    @property
    def user_edit(self) -> QLineEdit: ...
    @property
    def time_combo(self) -> QComboBox: ...
    @property
    def search_edit(self) -> QLineEdit: ...

    def apply_filters(self) -> None: ...


def views_key(profile: str) -> str:
    digest = hashlib.sha1(profile.encode(), usedforsecurity=False).hexdigest()[:16]
    return f"views/jobs-{digest}"


def capture(fields: FilterFields) -> dict[str, Any]:
    """The filter the fields show, as a view."""
    return {"statuses": sorted(str(s) for s, b in fields.status_buttons.items() if s is not None and b.isChecked()),
            "type": fields.type_edit.text(), "pipeline": fields.pipeline_edit.text(),
            "user": fields.user_edit.text(), "time": fields.time_combo.currentText(),
            "search": fields.search_edit.text()}


def restore(fields: FilterFields, view: dict[str, Any]) -> None:
    """Put a view back into the fields and filter by it."""
    statuses = set(view.get("statuses", []))
    for status, button in fields.status_buttons.items():
        button.blockSignals(True)
        button.setChecked(str(status) in statuses if status is not None else not statuses)
        button.blockSignals(False)
    for edit, key in ((fields.type_edit, "type"), (fields.pipeline_edit, "pipeline"), (fields.user_edit, "user"),
                      (fields.search_edit, "search")):
        edit.blockSignals(True)
        edit.setText(str(view.get(key, "")))
        edit.blockSignals(False)
    fields.time_combo.blockSignals(True)
    fields.time_combo.setCurrentText(str(view.get("time", fields.time_combo.itemText(0))))
    fields.time_combo.blockSignals(False)
    fields.apply_filters()


class SavedViews(QObject):
    """The views of one connection profile, and the Views button with its menu."""

    message = Signal(str)

    def __init__(self, fields: FilterFields, parent: QWidget) -> None:
        super().__init__(parent)
        self.fields = fields
        self._parent = parent
        self.profile = ""
        self.button = QToolButton()
        self.button.setText("Views")
        self.button.setToolTip("Saved views: named filters of this connection")
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.button)
        self.menu.aboutToShow.connect(self._fill_menu)
        self.button.setMenu(self.menu)
        self.save_action = QAction("Save view…", parent)
        self.save_action.setToolTip("Keep the current filter under a name, for this connection")
        self.save_action.triggered.connect(self.ask_save)

    def use_profile(self, profile: str) -> None:
        self.profile = profile

    def views(self) -> dict[str, dict[str, Any]]:
        text = console_settings().value(views_key(self.profile), "{}")
        try:
            views = json.loads(str(text))
        except ValueError:
            return {}
        return views if isinstance(views, dict) else {}

    def _store(self, views: dict[str, dict[str, Any]]) -> None:
        settings = console_settings()
        settings.setValue(views_key(self.profile), json.dumps(views))
        settings.sync()

    def save(self, name: str) -> bool:
        """Keep the current filter as `name` (replacing a view of that name); False if the name is
        empty or too long."""
        name = name.strip()
        if not name or len(name) > MAX_NAME:
            self.message.emit(f"a view needs a name of 1 to {MAX_NAME} characters")
            return False
        views = self.views()
        views[name] = capture(self.fields)
        self._store(views)
        self.message.emit(f"saved view “{name}”")
        return True

    def apply(self, name: str) -> bool:
        view = self.views().get(name)
        if view is None:
            return False
        restore(self.fields, view)
        self.message.emit(f"view “{name}”")
        return True

    def delete(self, name: str) -> bool:
        views = self.views()
        if views.pop(name, None) is None:
            return False
        self._store(views)
        self.message.emit(f"deleted view “{name}”")
        return True

    def ask_save(self) -> None:
        name, ok = QInputDialog.getText(self._parent, "Save view", "Name of this view:")
        if ok:
            self.save(name)

    def _fill_menu(self) -> None:
        self.menu.clear()
        views = sorted(self.views())
        for name in views:
            self.menu.addAction(name).triggered.connect(lambda _c=False, n=name: self.apply(n))
        if not views:
            self.menu.addAction("no saved views yet").setEnabled(False)
        self.menu.addSeparator()
        self.menu.addAction(self.save_action)
        delete = self.menu.addMenu("Delete view")
        delete.setEnabled(bool(views))
        for name in views:
            delete.addAction(name).triggered.connect(lambda _c=False, n=name: self.delete(n))
