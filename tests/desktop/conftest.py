from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path) -> Iterator[Path]:
    """Each console test keeps its user settings (profiles, column choices) in its own folder."""
    folder = tmp_path / "settings"
    folder.mkdir()
    QSettings.setPath(QSettings.Format.NativeFormat, QSettings.Scope.UserScope, str(folder))
    yield folder
