"""The console window's fixed parts around the tabs: the connection banner, the toolbar of actions
and the layout that puts the tabs beside the detail pane.

The main window builds these once and keeps its signals in `MainWindow._connect`; they hold no
state beyond what they show."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QLabel,
    QMenu,
    QSplitter,
    QTabWidget,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from jobdesk.console.access import gate
from jobdesk.console.theme import icon


class Banner(QLabel):
    """The strip above the tabs naming the database; the style sheet colours it by its `kind`
    (connecting, connected, production, disconnected)."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("banner")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)

    def show_state(self, text: str, kind: str) -> None:
        self.setText(text)
        self.setProperty("kind", kind)
        self.style().unpolish(self)
        self.style().polish(self)


class MainToolbar(QToolBar):
    """New job, the selected jobs' actions, All matching, Refresh, Connect, Launch worker and the
    Workers panel's switch. Its actions belong to `window`, whose signals they are connected to
    there."""

    def __init__(self, window: QWidget, job_actions: Iterable[QAction], bulk_actions: Iterable[QAction],
                 worker_actions: Iterable[QAction]) -> None:
        super().__init__("Actions")
        self.setMovable(False)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.new_job_action = QAction(icon("jobdesk"), "New job…", window)
        self.new_job_action.setShortcut(QKeySequence("Ctrl+N"))
        self.new_job_action.setEnabled(False)
        self.addAction(self.new_job_action)
        self.addSeparator()
        for action in job_actions:
            self.addAction(action)
        self.bulk_button = QToolButton()
        self.bulk_button.setText("All matching")
        self.bulk_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        bulk_menu = QMenu(self.bulk_button)
        bulk_menu.addActions(list(bulk_actions))
        self.bulk_button.setMenu(bulk_menu)
        self.bulk_tool_action = self.addWidget(self.bulk_button)
        self.addSeparator()
        self.refresh_action = QAction(icon("refresh"), "Refresh", window)
        self.refresh_action.setShortcut(QKeySequence.StandardKey.Refresh)
        self.addAction(self.refresh_action)
        self.connect_action = QAction(icon("connect"), "Connect…", window)
        self.connect_action.setShortcut(QKeySequence("Ctrl+O"))
        self.connect_action.setToolTip("Switch to another database (Ctrl+O)")
        self.addAction(self.connect_action)
        for action in worker_actions:
            self.addAction(action)
        self.set_read_only(None)

    def set_read_only(self, reason: str | None) -> None:
        """All matching stays in sight where jobs cannot be changed, disabled, saying why."""
        gate(self.bulk_button, True, reason, "Retry or cancel every job that matches the job table's filter")

    def update_new_job(self, connected: bool, reason: str | None) -> None:
        gate(self.new_job_action, connected, reason, "Submit a job (Ctrl+N)")


def central_widget(banner: QLabel, tabs: QTabWidget, pane: QWidget) -> QWidget:
    """The banner above the tabs, which sit beside the job pane in a splitter."""
    split = QSplitter(Qt.Orientation.Horizontal)
    split.addWidget(tabs)
    split.addWidget(pane)
    split.setStretchFactor(0, 3)
    split.setStretchFactor(1, 2)
    split.setSizes([800, 480])
    central = QWidget()
    layout = QVBoxLayout(central)
    layout.setContentsMargins(6, 0, 6, 6)
    layout.addWidget(banner)
    layout.addWidget(split, 1)
    return central
