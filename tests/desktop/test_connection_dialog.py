"""Connection profiles: saved without passwords, chosen with the password typed in."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

from jobdesk.console.connection_dialog import ConnectionDialog, Profile, ProfileStore, with_password, without_password


def store(tmp_path: Path) -> ProfileStore:
    return ProfileStore(QSettings(str(tmp_path / "jobdesk.ini"), QSettings.Format.IniFormat))


def test_passwords_are_never_written(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    profiles = store(tmp_path)
    dialog = ConnectionDialog(profiles)
    qtbot.addWidget(dialog)
    dialog.new_profile()
    dialog.name.setText("prod-eu")
    dialog.url.setText("postgresql://ops:url-secret@db.example.com:5432/jobs")
    dialog.password.setText("typed-secret")
    dialog.production.setChecked(True)
    dialog.save_current()
    saved = (tmp_path / "jobdesk.ini").read_text()
    assert "url-secret" not in saved and "typed-secret" not in saved
    assert store(tmp_path).load() == [Profile("prod-eu", "postgresql://ops@db.example.com:5432/jobs", True, False)]
    assert dialog.list.item(1).text() == "⚠ prod-eu"
    profile, url = dialog.chosen()
    assert profile is not None and profile.production
    assert url == "postgresql://ops:typed-secret@db.example.com:5432/jobs"


def test_embedded_entry_and_bad_url(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dialog = ConnectionDialog(store(tmp_path))
    qtbot.addWidget(dialog)
    assert dialog.chosen() == (None, None), "the first entry is the embedded database"
    dialog.new_profile()
    dialog.name.setText("typo")
    dialog.url.setText("mysql://nope")
    dialog.save_current()
    assert "postgresql://" in dialog.error.text()
    assert store(tmp_path).load() == []


def test_password_helpers() -> None:
    assert without_password("postgresql://a:b@h:1/d?sslmode=disable") == "postgresql://a@h:1/d?sslmode=disable"
    assert with_password("postgresql://a@h/d", "p@ss word") == "postgresql://a:p%40ss%20word@h/d"
    assert with_password("postgresql://a@h/d", "") == "postgresql://a@h/d"
