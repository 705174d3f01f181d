"""The About box: which jobdesk this is (the version the package was built with), on which Python
and Qt, and the database the window is connected to."""

from __future__ import annotations

import platform

import PySide6
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from jobdesk.core.version import __version__

DOCS_HINT = "Documentation: the docs/ folder of jobdesk's source (make docs builds the site)."


def about_lines(database: str) -> list[str]:
    """What the box says, line by line (also what a test reads)."""
    return [f"jobdesk {__version__}",
            "A job system on PostgreSQL, and the console to run it.",
            f"Python {platform.python_version()} · Qt {qVersion()} · PySide6 {PySide6.__version__}",
            f"Database: {database}"]


class AboutDialog(QDialog):
    def __init__(self, parent: QWidget, database: str) -> None:
        super().__init__(parent)
        self.setWindowTitle("About jobdesk")
        self.setMinimumWidth(460)
        layout = QVBoxLayout(self)
        title, *rest = about_lines(database)
        heading = QLabel(f"<h2>{title}</h2>")
        heading.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(heading)
        self.body = QLabel("\n".join([rest[0], "", *rest[1:], "", DOCS_HINT]))
        self.body.setTextFormat(Qt.TextFormat.PlainText)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setWordWrap(True)
        layout.addWidget(self.body)
        layout.addStretch(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
