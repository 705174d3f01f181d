"""Keeps a live table still while rows are inserted above what the user looks at.

New jobs arrive at the top of the job table. Left to itself, the view keeps its scroll offset, so
every insert above pushes the rows on screen down, and a selected row soon scrolls out of sight.
The anchor is the selected row when it is on screen, else the top row when the view is scrolled
down; after rows go in above it, the view scrolls by as much, and the anchor stays where it was on
screen. At the very top with nothing selected nothing is anchored: new rows show as they come."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex
from PySide6.QtWidgets import QTableView


class ScrollAnchor(QObject):
    def __init__(self, table: QTableView) -> None:
        super().__init__(table)
        self.table = table
        self._anchor: QPersistentModelIndex | None = None
        self._offset = 0  # the anchor's distance from the viewport's top, in pixels
        model = table.model()
        model.rowsAboutToBeInserted.connect(self._before_insert)
        model.rowsInserted.connect(self._after_insert)

    def _anchor_row(self) -> int | None:
        viewport_height = self.table.viewport().height()
        current = self.table.selectionModel().selectedRows()
        if current:
            row = current[0].row()
            y = self.table.rowViewportPosition(row)
            if 0 <= y < viewport_height:
                return row
        if self.table.verticalScrollBar().value() > 0:
            top = self.table.rowAt(0)
            return top if top >= 0 else None
        return None

    def _before_insert(self, parent: QModelIndex, first: int, _last: int) -> None:
        self._anchor = None
        if parent.isValid():
            return
        row = self._anchor_row()
        if row is None or first > row:
            return  # rows below the anchor move nothing on screen
        self._anchor = QPersistentModelIndex(self.table.model().index(row, 0))
        self._offset = self.table.rowViewportPosition(row)

    def _after_insert(self, parent: QModelIndex, _first: int, _last: int) -> None:
        anchor, self._anchor = self._anchor, None
        if anchor is None or parent.isValid() or not anchor.isValid():
            return
        self.table.doItemsLayout()  # the scroll range must include the new rows before scrolling
        bar = self.table.verticalScrollBar()
        moved = self.table.rowViewportPosition(anchor.row()) - self._offset
        if moved <= 0:
            return
        # The bar counts rows (scrolling per item) or pixels: scroll by the rows' worth either way.
        step = 1 if self.table.verticalScrollMode() == QTableView.ScrollMode.ScrollPerItem else 0
        height = max(1, self.table.rowHeight(anchor.row()))
        bar.setValue(bar.value() + (round(moved / height) if step else moved))
