"""Which columns a table shows, and how wide, remembered per connection profile.

The header's context menu shows or hides columns; the header's state (order, widths, hidden
columns) is kept in the user's settings under the table's name and the database it shows, so the
production database can keep other columns than the laptop's embedded one."""

from __future__ import annotations

import hashlib
from collections.abc import Collection

from PySide6.QtCore import QByteArray, QPoint, QSettings, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QTableView

from jobdesk.console.list_table import scaled


def console_settings() -> QSettings:
    """The console's user settings (the same store as the connection profiles)."""
    return QSettings("jobdesk", "jobdesk")


def settings_key(table: str, profile: str) -> str:
    # A database description holds slashes and colons; a digest keeps the key one plain word.
    digest = hashlib.sha1(profile.encode(), usedforsecurity=False).hexdigest()[:16]
    return f"columns/{table}-{digest}"


class ColumnPrefs:
    """Owns a table header's column choices: the default widths and hidden columns, the header
    menu, and saving and restoring them."""

    def __init__(self, table: QTableView, name: str, widths: list[int], hidden: Collection[int] = ()) -> None:
        self.table = table
        self.header = table.horizontalHeader()
        self.name = name
        self.widths = widths
        self.default_hidden = frozenset(hidden)
        self.profile: str | None = None
        self._restoring = False
        self._save_timer = QTimer(table, singleShot=True, interval=300)
        self._save_timer.timeout.connect(self.save)
        self.header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.header.customContextMenuRequested.connect(self._menu_at)
        self.header.sectionResized.connect(self._changed)
        self.header.sectionMoved.connect(self._changed)
        self.reset()

    def reset(self) -> None:
        """The default columns and widths."""
        self._restoring = True
        try:
            for col in range(self.header.count()):
                self.header.moveSection(self.header.visualIndex(col), col)
                self.header.setSectionHidden(col, col in self.default_hidden)
                if col < len(self.widths):
                    self.table.setColumnWidth(col, scaled(self.widths[col], self.table))
        finally:
            self._restoring = False
        self._changed()

    def use_profile(self, profile: str) -> None:
        """Show the columns remembered for this profile (the defaults if none are)."""
        self.profile = profile
        state = console_settings().value(settings_key(self.name, profile))
        if isinstance(state, QByteArray) and not state.isEmpty():
            self._restoring = True
            try:
                restored = self.header.restoreState(state)
            finally:
                self._restoring = False
            if restored and self.visible_columns():
                return
        self.reset()

    def save(self) -> None:
        if self.profile is None:
            return
        settings = console_settings()
        settings.setValue(settings_key(self.name, self.profile), self.header.saveState())
        settings.sync()

    def flush(self) -> None:
        """Save now what is waiting to be saved (the window closes)."""
        if self._save_timer.isActive():
            self._save_timer.stop()
            self.save()

    def visible_columns(self) -> list[int]:
        return [c for c in range(self.header.count()) if not self.header.isSectionHidden(c)]

    def set_visible(self, col: int, visible: bool) -> None:
        if not visible and self.visible_columns() == [col]:
            return  # the last column stays
        self.header.setSectionHidden(col, not visible)
        if visible and self.header.sectionSize(col) < 30:
            self.table.setColumnWidth(col, scaled(self.widths[col] if col < len(self.widths) else 80, self.table))
        self._changed()

    def menu(self) -> QMenu:
        """The header's menu: one check per column, and a reset."""
        menu = QMenu(self.header)
        model = self.table.model()
        visible = self.visible_columns()
        for col in range(self.header.count()):
            title = str(model.headerData(col, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole))
            action = QAction(title, menu, checkable=True)
            action.setChecked(col in visible)
            action.setEnabled(visible != [col])
            action.toggled.connect(lambda on, c=col: self.set_visible(c, on))
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction("Default columns", self.reset)
        return menu

    def _menu_at(self, pos: QPoint) -> None:
        self.menu().exec(self.header.mapToGlobal(pos))

    def _changed(self, *_: object) -> None:
        if not self._restoring and self.profile is not None:
            self._save_timer.start()
