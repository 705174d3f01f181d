"""Paints a pipeline's progress as a small bar with "n of m" beside it, and its status as a chip."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from jobdesk.console.pipelines.pipeline_model import COL_PROGRESS, COL_STATUS, ROW_ROLE, pipeline_label
from jobdesk.console.theme import STATUS_COLOURS
from jobdesk.core.models import Status
from jobdesk.store.pipelines import PipelineRow, PipelineStatus

# A pipeline's status borrows the colour of the job status it stands for.
PIPELINE_COLOURS = {
    PipelineStatus.RUNNING: STATUS_COLOURS[Status.IN_PROGRESS],
    PipelineStatus.WAITING_APPROVAL: STATUS_COLOURS[Status.WAITING_APPROVAL],
    PipelineStatus.FAILED: STATUS_COLOURS[Status.FAILED],
    PipelineStatus.CANCELLED: STATUS_COLOURS[Status.CANCELLED],
    PipelineStatus.COMPLETED: STATUS_COLOURS[Status.COMPLETED],
}


class PipelineDelegate(QStyledItemDelegate):
    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        row: PipelineRow | None = index.data(ROW_ROLE)
        if row is None or index.column() not in (COL_PROGRESS, COL_STATUS):
            super().paint(painter, option, index)
            return
        rect = option.rect  # type: ignore[attr-defined]
        palette: QPalette = option.palette  # type: ignore[attr-defined]
        if option.state & QStyle.StateFlag.State_Selected:  # type: ignore[attr-defined]
            painter.fillRect(rect, palette.highlight())
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        background, foreground = PIPELINE_COLOURS[row.status]
        metrics = option.fontMetrics  # type: ignore[attr-defined]
        if index.column() == COL_STATUS:
            text = pipeline_label(row.status)
            chip = QRectF(rect.x() + 3, rect.y() + 3, min(rect.width() - 6, metrics.horizontalAdvance(text) + 14),
                          rect.height() - 6)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(background))
            painter.drawRoundedRect(chip, chip.height() / 2, chip.height() / 2)
            painter.setPen(QColor(foreground))
            painter.drawText(chip, int(Qt.AlignmentFlag.AlignCenter), text)
        else:
            text = f"{row.completed} of {row.total}"
            text_w = metrics.horizontalAdvance(f"{row.total} of {row.total}") + 8
            bar = QRectF(rect.x() + 4, rect.center().y() - 4, max(20, rect.width() - text_w - 12), 8)
            painter.setPen(Qt.PenStyle.NoPen)
            track = QColor(palette.color(QPalette.ColorRole.Text))
            track.setAlpha(45)
            painter.setBrush(track)
            painter.drawRoundedRect(bar, 4, 4)
            done = bar.adjusted(0, 0, -bar.width() * (1 - row.completed / max(1, row.total)), 0)
            if done.width() > 0:
                painter.setBrush(QColor(background))
                painter.drawRoundedRect(done, 4, 4)
            painter.setPen(palette.color(QPalette.ColorRole.Text))
            painter.drawText(QRectF(bar.right() + 6, rect.y(), text_w, rect.height()),
                             int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), text)
        painter.restore()
