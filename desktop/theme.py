"""Colours, icons and the light or dark style, chosen to follow the OS."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QApplication

from jobdesk.core.models import Status
from jobdesk.core.paths import resources_dir

RESOURCES = resources_dir()

# Status colours: (background, text). Failures and approvals stand out; finished work recedes.
STATUS_COLOURS: dict[Status, tuple[str, str]] = {
    Status.QUEUED: ("#5b6b7f", "#ffffff"),
    Status.IN_PROGRESS: ("#1f6feb", "#ffffff"),
    Status.COMPLETED: ("#2da44e", "#ffffff"),
    Status.FAILED: ("#cf222e", "#ffffff"),
    Status.CANCELLED: ("#8c959f", "#ffffff"),
    Status.WAITING_APPROVAL: ("#d4a72c", "#1f2328"),
}

# A symbol beside the colour, so status never depends on colour alone.
STATUS_SYMBOLS: dict[Status, str] = {
    Status.QUEUED: "◷", Status.IN_PROGRESS: "▶", Status.COMPLETED: "✔", Status.FAILED: "✖",
    Status.CANCELLED: "⊘", Status.WAITING_APPROVAL: "⚑",
}


def status_label(status: Status, *, symbol: bool = True) -> str:
    """How a status reads in the console: "✖ failed", "⚑ waiting approval"."""
    text = status.value.replace("_", " ")
    return f"{STATUS_SYMBOLS[status]} {text}" if symbol else text


def is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    scheme = hints.colorScheme() if hints is not None else Qt.ColorScheme.Unknown
    if scheme != Qt.ColorScheme.Unknown:
        return scheme == Qt.ColorScheme.Dark
    window = QGuiApplication.palette().color(QPalette.ColorRole.Window)
    return window.lightness() < 128


def apply_style(app: QApplication, dark: bool | None = None) -> bool:
    """Apply the light or dark style sheet (following the OS unless told); return whether dark."""
    dark = is_dark() if dark is None else dark
    app.setStyle("Fusion")
    palette = QPalette()
    if dark:
        for role, colour in ((QPalette.ColorRole.Window, "#1f2328"), (QPalette.ColorRole.Base, "#161b22"),
                             (QPalette.ColorRole.AlternateBase, "#1c2128"), (QPalette.ColorRole.Text, "#e6edf3"),
                             (QPalette.ColorRole.WindowText, "#e6edf3"), (QPalette.ColorRole.Button, "#2d333b"),
                             (QPalette.ColorRole.ButtonText, "#e6edf3"), (QPalette.ColorRole.Highlight, "#1f6feb"),
                             (QPalette.ColorRole.HighlightedText, "#ffffff"),
                             (QPalette.ColorRole.ToolTipBase, "#2d333b"),
                             (QPalette.ColorRole.ToolTipText, "#e6edf3"),
                             (QPalette.ColorRole.PlaceholderText, "#7d8590"),
                             (QPalette.ColorRole.Link, "#58a6ff")):
            palette.setColor(role, QColor(colour))
        # setColor() above set every group; disabled controls must still look disabled.
        for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
            palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6e7681"))
    app.setPalette(palette)
    sheet = RESOURCES / ("dark.qss" if dark else "light.qss")
    app.setStyleSheet(sheet.read_text(encoding="utf-8") if sheet.exists() else "")
    points = app.property(TEXT_POINTS)
    if points is not None:
        set_text_size(app, float(points))
    return dark


TEXT_POINTS = "jobdeskTextPoints"  # the application's property holding the user's text size
_TEXT_RULE = "\n/* text size */ * { font-size: "


def set_text_size(app: QApplication, points: float) -> None:
    """The text size, in points, for every widget. Under a style sheet the application's font
    alone does not reach the widgets it styles, so the sheet carries the size too."""
    app.setProperty(TEXT_POINTS, points)
    sheet = app.styleSheet()
    if not sheet:
        return
    base = sheet.split(_TEXT_RULE, 1)[0]
    app.setStyleSheet(f"{base}{_TEXT_RULE}{points:g}pt; }}")


def follow_os_style(app: QApplication) -> None:
    """Apply the OS's light or dark style now, and again whenever the OS switches."""
    apply_style(app)
    hints = QGuiApplication.styleHints()
    if hints is not None:
        hints.colorSchemeChanged.connect(lambda _scheme: apply_style(app))


def icon(name: str) -> QIcon:
    path: Path = RESOURCES / "icons" / f"{name}.svg"
    return QIcon(str(path)) if path.exists() else QIcon()
