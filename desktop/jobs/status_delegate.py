"""Paints a job's status as a coloured chip with a symbol."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from desktop.jobs.job_table_model import ROW_ROLE
from desktop.theme import STATUS_COLOURS, status_label


class StatusChipDelegate(QStyledItemDelegate):
    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        row = index.data(ROW_ROLE)
        if row is None:
            super().paint(painter, option, index)
            return
        if option.state & QStyle.StateFlag.State_Selected:  # type: ignore[attr-defined]
            painter.fillRect(option.rect, option.palette.highlight())  # type: ignore[attr-defined]
        background, foreground = STATUS_COLOURS[row.status]
        text = status_label(row.status)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        metrics = option.fontMetrics  # type: ignore[attr-defined]
        rect = option.rect  # type: ignore[attr-defined]
        width = min(rect.width() - 6, metrics.horizontalAdvance(text) + 14)
        chip = QRectF(rect.x() + 3, rect.y() + 3, width, rect.height() - 6)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(background))
        painter.drawRoundedRect(chip, chip.height() / 2, chip.height() / 2)
        painter.setPen(QColor(foreground))
        painter.drawText(chip, int(Qt.AlignmentFlag.AlignCenter), text)
        painter.restore()
