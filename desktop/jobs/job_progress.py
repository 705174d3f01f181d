"""A job's progress as the console shows it: a bar with its percentage in the job table's
Progress column (a delegate), and a bar with the processor's message in the detail pane."""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from jobdesk.console.jobs.job_table_model import PROGRESS_ROLE, ROW_ROLE
from jobdesk.console.theme import STATUS_COLOURS
from jobdesk.core.job_report import JobProgress
from jobdesk.core.models import Status
from jobdesk.core.timefmt import relative

STEPS = 1000  # the detail bar's range: tenths of a percent


def percent(progress: JobProgress) -> str:
    return f"{progress.fraction * 100:.0f}%"


class JobProgressDelegate(QStyledItemDelegate):
    """A rounded bar filled to the row's fraction, in its status's colour, and "40%" beside it.
    Rows that reported no progress show nothing."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        progress: JobProgress | None = index.data(PROGRESS_ROLE)
        row = index.data(ROW_ROLE)
        if progress is None or row is None:
            super().paint(painter, option, index)
            return
        rect = option.rect  # type: ignore[attr-defined]
        palette: QPalette = option.palette  # type: ignore[attr-defined]
        selected = bool(option.state & QStyle.StateFlag.State_Selected)  # type: ignore[attr-defined]
        if selected:
            painter.fillRect(rect, palette.highlight())
        metrics = option.fontMetrics  # type: ignore[attr-defined]
        text_w = metrics.horizontalAdvance("100%") + 6
        bar = QRectF(rect.x() + 4, rect.center().y() - 4, max(12, rect.width() - text_w - 12), 8)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        text_colour = palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        track = QColor(text_colour)
        track.setAlpha(70 if selected else 45)
        painter.setBrush(track)
        painter.drawRoundedRect(bar, 4, 4)
        done = QRectF(bar.x(), bar.y(), bar.width() * progress.fraction, bar.height())
        if done.width() > 0:  # on a selected row the status colour would vanish into the highlight
            painter.setBrush(text_colour if selected else QColor(STATUS_COLOURS[Status(row.status)][0]))
            painter.drawRoundedRect(done, 4, 4)
        painter.setPen(text_colour)
        painter.drawText(QRectF(bar.right() + 4, rect.y(), text_w, rect.height()),
                         int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), percent(progress))
        painter.restore()


class ProgressField(QWidget):
    """The detail pane's Progress row: a bar and the processor's last message, or "—"."""

    def __init__(self) -> None:
        super().__init__()
        self.bar = QProgressBar()
        self.bar.setRange(0, STEPS)
        self.bar.setFixedWidth(140)
        self.bar.setTextVisible(True)
        self.label = QLabel("—")
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # the processor's words, never markup
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar)
        layout.addWidget(self.label, 1)
        self.show_progress(None)

    def show_progress(self, progress: JobProgress | None, now: datetime | None = None) -> None:
        if progress is None:
            self.bar.hide()
            self.label.setText("—")
            self.label.setToolTip("")
            return
        self.bar.show()
        self.bar.setValue(round(progress.fraction * STEPS))
        self.bar.setFormat(percent(progress))
        said = relative(progress.at, now or datetime.now(UTC))
        self.label.setText(f"{progress.message} ({said})" if progress.message else f"({said})")
        self.label.setToolTip(progress.at.astimezone().strftime("reported %Y-%m-%d %H:%M:%S"))
