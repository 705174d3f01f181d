"""Choose the database: the embedded one, or a saved connection profile.

Profiles keep a name, a URL without its password, and whether the database is production or
should open read-only. Passwords are asked for when connecting and never written anywhere.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

EMBEDDED = "Embedded database (this computer)"


@dataclass
class Profile:
    name: str
    url: str  # never holds a password
    production: bool = False
    read_only: bool = False


def without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    user = quote(parts.username or "", safe="")
    return urlunsplit(parts._replace(netloc=f"{user}@{host}" if user else host))


def with_password(url: str, password: str) -> str:
    if not password:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    user = quote(parts.username or "", safe="")
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


class ProfileStore:
    """Profiles in the user's settings (QSettings), as JSON without passwords."""

    def __init__(self, settings: QSettings | None = None) -> None:
        self.settings = settings or QSettings("jobdesk", "jobdesk")

    def load(self) -> list[Profile]:
        raw = self.settings.value("connections/profiles", "[]")
        try:
            return [Profile(**p) for p in json.loads(str(raw))]
        except (ValueError, TypeError):
            return []

    def save(self, profiles: list[Profile]) -> None:
        clean = [asdict(Profile(p.name, without_password(p.url), p.production, p.read_only)) for p in profiles]
        self.settings.setValue("connections/profiles", json.dumps(clean))
        self.settings.sync()


class ConnectionDialog(QDialog):
    """Lists profiles; `chosen()` gives (profile or None for embedded, URL with password)."""

    def __init__(self, store: ProfileStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect to a database")
        self.store = store
        self.profiles = store.load()
        self.list = QListWidget()
        self.list.currentRowChanged.connect(self._show)
        self.name = QLineEdit()
        self.url = QLineEdit()
        self.url.setPlaceholderText("postgresql://user@host:5432/dbname")
        self.password = QLineEdit()
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        self.password.setPlaceholderText("asked each time, never saved")
        self.production = QCheckBox("Production database (warning banner)")
        self.read_only = QCheckBox("Open read-only")
        self.error = QLabel()
        self.error.setObjectName("dialogError")
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("URL", self.url)
        form.addRow("Password", self.password)
        form.addRow("", self.production)
        form.addRow("", self.read_only)
        new, save, delete = QPushButton("New"), QPushButton("Save profile"), QPushButton("Delete")
        new.clicked.connect(self.new_profile)
        save.clicked.connect(self.save_current)
        delete.clicked.connect(self.delete_current)
        row = QHBoxLayout()
        row.addWidget(new)
        row.addWidget(save)
        row.addWidget(delete)
        row.addStretch(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        connect = buttons.addButton("Connect", QDialogButtonBox.ButtonRole.AcceptRole)
        connect.setDefault(True)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        right = QVBoxLayout()
        right.addLayout(form)
        right.addLayout(row)
        right.addWidget(self.error)
        right.addStretch(1)
        right.addWidget(buttons)
        layout = QHBoxLayout(self)
        layout.addWidget(self.list, 1)
        layout.addLayout(right, 2)
        self._refresh_list(0)

    def _refresh_list(self, select: int) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        self.list.addItem(EMBEDDED)
        for p in self.profiles:
            self.list.addItem(("⚠ " if p.production else "") + p.name)
        self.list.blockSignals(False)
        self.list.setCurrentRow(select)
        self._show(select)

    def _show(self, row: int) -> None:
        profile = self.profiles[row - 1] if 0 < row <= len(self.profiles) else None
        for widget in (self.name, self.url, self.password, self.production, self.read_only):
            widget.setEnabled(profile is not None or row < 0 or row > len(self.profiles))
        self.name.setText(profile.name if profile else "")
        self.url.setText(profile.url if profile else "")
        self.password.clear()
        self.production.setChecked(bool(profile and profile.production))
        self.read_only.setChecked(bool(profile and profile.read_only))
        self.error.clear()

    def _form_profile(self) -> Profile | None:
        name, url = self.name.text().strip(), self.url.text().strip()
        if not name or not url:
            self.error.setText("A profile needs a name and a URL.")
            return None
        if urlsplit(url).scheme not in ("postgresql", "postgres"):
            self.error.setText("The URL must start with postgresql://")
            return None
        return Profile(name, without_password(url), self.production.isChecked(), self.read_only.isChecked())

    def save_current(self) -> None:
        profile = self._form_profile()
        if profile is None:
            return
        row = self.list.currentRow()
        if 0 < row <= len(self.profiles) and self.profiles[row - 1].name == profile.name:
            self.profiles[row - 1] = profile
        else:
            self.profiles = [p for p in self.profiles if p.name != profile.name] + [profile]
            row = self.profiles.index(profile) + 1
        self.store.save(self.profiles)
        typed = self.password.text()
        self._refresh_list(row)
        self.password.setText(typed)  # kept in memory for this connection, never saved

    def delete_current(self) -> None:
        row = self.list.currentRow()
        if 0 < row <= len(self.profiles):
            del self.profiles[row - 1]
            self.store.save(self.profiles)
            self._refresh_list(0)

    def new_profile(self) -> None:
        self.list.setCurrentRow(-1)
        for widget in (self.name, self.url, self.password, self.production, self.read_only):
            widget.setEnabled(True)
        self.name.setFocus()

    def chosen(self) -> tuple[Profile | None, str | None]:
        """The selected profile (None: embedded) and its URL with the password typed in."""
        row = self.list.currentRow()
        if row == 0:
            return None, None
        profile = self._form_profile()
        if profile is None:
            return None, None
        # A password typed into the URL field is used for this connection only.
        typed = urlsplit(self.url.text().strip()).password or ""
        return profile, with_password(profile.url, self.password.text() or typed)

    def _accept(self) -> None:
        if self.list.currentRow() != 0 and self._form_profile() is None:
            return
        self.accept()
