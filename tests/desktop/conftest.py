from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from tests.desktop.qt_helpers import close_loop, running_qthreads


@pytest.fixture(scope="session", autouse=True)
def no_qthread_left_running() -> Iterator[None]:
    """At the end of the run the console tests' loop is closed, and no QThread may run on: Qt would
    print `QThread: Destroyed while thread '' is still running` as the process exits."""
    yield
    close_loop()
    running = running_qthreads()
    assert not running, f"{len(running)} QThread(s) still running at the end of the run: {running}"


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path) -> Iterator[Path]:
    """Each console test keeps its user settings (profiles, column choices) in its own folder."""
    folder = tmp_path / "settings"
    folder.mkdir()
    QSettings.setPath(QSettings.Format.NativeFormat, QSettings.Scope.UserScope, str(folder))
    yield folder
