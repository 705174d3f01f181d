"""Keys without modifiers, and the `?` list of every shortcut.

`/` focuses the job search, `j` / `k` move down and up in the current tab's table, `?` lists
every shortcut. They are window shortcuts, so they act wherever the focus is, except in a text
field: a line edit or text editor takes printable keys for itself before shortcuts see them.
The list is read from the window's own QActions and QShortcuts, so it cannot go stale."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

# Keys a view handles itself (not shortcuts of the window), listed with the rest.
VIEW_KEYS: list[tuple[str, str]] = [
    ("F", "Pipeline graph: fit the whole pipeline"),
    ("C", "Pipeline graph: centre on the running (else failed, else waiting) job"),
    ("+ / −", "Pipeline graph: zoom in / out"),
]


def add_shortcut(window: QWidget, key: str, description: str, slot: Callable[[], None]) -> QShortcut:
    shortcut = QShortcut(QKeySequence(key), window)
    shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
    shortcut.setWhatsThis(description)  # what the `?` list says about it
    shortcut.activated.connect(slot)
    return shortcut


def move_in(table: QTableView, step: int) -> None:
    """Move the current row of `table` by `step`, selecting it (as the arrow keys do)."""
    model = table.model()
    if model is None or model.rowCount() == 0:
        return
    current = table.currentIndex()
    if not table.selectionModel().hasSelection():  # the first key selects where the view stands
        row = current.row() if current.isValid() else 0
    else:
        row = max(0, min(model.rowCount() - 1, current.row() + step))
    if current.isValid() and row == current.row() and table.selectionModel().isRowSelected(row):
        return
    column = current.column() if current.isValid() else 0
    table.setCurrentIndex(model.index(row, max(0, column)))
    table.selectRow(row)
    table.scrollTo(model.index(row, 0))
    table.setFocus()


def shortcut_list(window: QWidget) -> list[tuple[str, str]]:
    """(keys, what they do) for every action and shortcut of the window, in key order."""
    found: dict[tuple[str, str], None] = {}
    for action in window.findChildren(QAction):
        for sequence in action.shortcuts():
            if not sequence.isEmpty():
                text = action.toolTip() or action.text()
                found[(sequence.toString(QKeySequence.SequenceFormat.NativeText), text.replace("&", ""))] = None
    for shortcut in window.findChildren(QShortcut):
        if not shortcut.key().isEmpty():
            found[(shortcut.key().toString(QKeySequence.SequenceFormat.NativeText), shortcut.whatsThis())] = None
    for item in VIEW_KEYS:
        found[item] = None
    return sorted(found, key=lambda kv: (len(kv[0]) > 1, kv[0].lower()))


class ShortcutsDialog(QDialog):
    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.setWindowTitle("Keyboard shortcuts")
        self.resize(560, 480)
        rows = shortcut_list(window)
        self.table = QTableWidget(len(rows), 2)
        self.table.setHorizontalHeaderLabels(["Keys", "Does"])
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setColumnWidth(0, 150)
        for i, (keys, does) in enumerate(rows):
            self.table.setItem(i, 0, QTableWidgetItem(keys))
            self.table.setItem(i, 1, QTableWidgetItem(does))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
