"""Paints a job's status as a coloured chip with a symbol; a queued job that a durable sleep or
wait suspended reads "suspended", in the timeline's colour of suspensions."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from jobdesk.console.jobs.attempt_timeline import SUSPEND_COLOUR
from jobdesk.console.jobs.job_table_model import ROW_ROLE
from jobdesk.console.theme import STATUS_COLOURS, STATUS_SYMBOLS, status_label
from jobdesk.core.models import Status

STATUS_ROLE = Qt.ItemDataRole.UserRole + 7  # a row's Status, for models whose rows are not JobRows


class StatusChipDelegate(QStyledItemDelegate):
    """The chip of the row's status: the JobRow's (ROW_ROLE) or the Status under STATUS_ROLE.
    Cells with neither are painted as text."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        row = index.data(ROW_ROLE)
        value = row.status if row is not None else index.data(STATUS_ROLE)
        if value is None:
            super().paint(painter, option, index)
            return
        status = Status(value)  # through Qt, a Status comes back as its str
        if option.state & QStyle.StateFlag.State_Selected:  # type: ignore[attr-defined]
            painter.fillRect(option.rect, option.palette.highlight())  # type: ignore[attr-defined]
        background, foreground = STATUS_COLOURS[status]
        text = status_label(status)
        if row is not None and row.suspended:
            background, text = SUSPEND_COLOUR, f"{STATUS_SYMBOLS[status]} suspended"
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
