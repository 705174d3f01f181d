"""The table view every list of the console uses: whole rows selected, no row numbers, compact
rows, alternating colours, resizable columns with the last one stretched.

Widths and row heights follow the font: a table's widths are written as pixels at a font whose
digits are `DIGIT_PX` wide, and scaled by the width of a digit in the table's font, so a larger
system or user font widens the columns instead of cutting their text (see `font_size`)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QAbstractItemModel
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

DIGIT_PX = 7.625  # the width of "0" in the font the widths are written for (9-point DejaVu Sans)
ROW_PADDING = 12  # pixels a row has above and below its text, together


def digit_width(widget: QWidget) -> float:
    return QFontMetricsF(widget.font()).horizontalAdvance("0")


def scaled(width: int, widget: QWidget) -> int:
    """A width written for `DIGIT_PX` digits, in the widget's font."""
    return round(width * digit_width(widget) / DIGIT_PX)


def row_height(widget: QWidget, padding: int = ROW_PADDING) -> int:
    return widget.fontMetrics().height() + padding


def list_table(model: QAbstractItemModel, widths: Sequence[int], *, multi_select: bool = False,
               padding: int = ROW_PADDING) -> QTableView:
    table = QTableView()
    table.setModel(model)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection if multi_select
                           else QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().hide()
    table.verticalHeader().setDefaultSectionSize(row_height(table, padding))
    table.setProperty("rowPadding", padding)  # the font's change keeps it (`font_size.refit_tables`)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    header.setStretchLastSection(True)
    for col, width in enumerate(widths):
        table.setColumnWidth(col, scaled(width, table))
    return table
