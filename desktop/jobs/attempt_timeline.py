"""A job's attempts on a time axis: waiting in the queue, running, and the backoff between one
failed attempt and the next, each run coloured by its outcome.

`segments()` reads them from the job row and its `job_attempts` rows (pure, tested alone); the
widget draws them with QPainter."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QHelpEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from desktop.theme import STATUS_COLOURS
from worker.core.models import JobRecord, Status
from worker.core.timefmt import span
from worker.service.jobs import Attempt

WAIT, RUN, BACKOFF = "wait", "run", "backoff"
OUTCOME_COLOURS = {"completed": STATUS_COLOURS[Status.COMPLETED][0], "running": STATUS_COLOURS[Status.IN_PROGRESS][0],
                   "waiting_approval": STATUS_COLOURS[Status.WAITING_APPROVAL][0],
                   "cancelled": STATUS_COLOURS[Status.CANCELLED][0]}
FAILED_COLOUR = STATUS_COLOURS[Status.FAILED][0]  # failed, lost, interrupted: the attempt did not finish
WAIT_COLOUR, BACKOFF_COLOUR = "#8c959f", "#d4a72c"


@dataclass(frozen=True)
class Segment:
    kind: str  # wait, run or backoff
    attempt: int
    start: datetime
    end: datetime
    outcome: str = ""  # of a run: completed, failed, lost, … or running
    open_ended: bool = False  # still going (ends now), or a retry that is still due

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())

    def describe(self) -> str:
        what = {WAIT: "waited in the queue", BACKOFF: "backoff before the retry",
                RUN: f"ran: {self.outcome}"}[self.kind]
        more = " (so far)" if self.open_ended and self.kind != BACKOFF else " (due)" if self.open_ended else ""
        return f"attempt {self.attempt}: {what}, {span(self.seconds)}{more}"


def segments(job: JobRecord, attempts: list[Attempt], now: datetime) -> list[Segment]:
    """Wait, run and backoff segments in time order. The finished attempts come from
    `job_attempts`; the current one (running, or the one that completed) from the job row."""
    out: list[Segment] = []
    previous_end = job.created_at
    for a in sorted(attempts, key=lambda a: (a.attempt, a.finished_at)):
        start = a.started_at or a.finished_at
        if start > previous_end:
            out.append(Segment(WAIT if not out else BACKOFF, a.attempt, previous_end, start))
        out.append(Segment(RUN, a.attempt, start, a.finished_at, a.outcome))
        previous_end = max(previous_end, a.finished_at)
    number = (max((a.attempt for a in attempts), default=0)) + 1
    current_run = job.started_at is not None and job.started_at >= previous_end and job.status in (
        Status.IN_PROGRESS, Status.COMPLETED, Status.WAITING_APPROVAL)
    if current_run:
        assert job.started_at is not None
        if job.started_at > previous_end:
            out.append(Segment(WAIT if not out else BACKOFF, number, previous_end, job.started_at))
        running = job.status == Status.IN_PROGRESS
        end = now if running or job.completed_at is None else job.completed_at
        outcome = "running" if running else job.status.value
        out.append(Segment(RUN, number, job.started_at, max(end, job.started_at), outcome, open_ended=running))
    elif job.status == Status.QUEUED:
        kind = WAIT if not out else BACKOFF
        if job.next_retry_at is not None and job.next_retry_at > now:
            out.append(Segment(kind, number, previous_end, job.next_retry_at, open_ended=True))
        elif now > previous_end:
            out.append(Segment(kind, number, previous_end, now, open_ended=True))
    return out


class AttemptTimeline(QWidget):
    """Draws `segments` on one lane with a time axis below; hover shows what a segment was."""

    LANE_TOP, LANE_HEIGHT, MARGIN = 22, 18, 8

    def __init__(self) -> None:
        super().__init__()
        self.segments: list[Segment] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(400, 70)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(120, 70)

    def show_segments(self, items: list[Segment]) -> None:
        self.segments = items
        self.update()

    def _span(self) -> tuple[datetime, float]:
        start = self.segments[0].start
        end = max(s.end for s in self.segments)
        return start, max((end - start).total_seconds(), 1e-3)

    def _x(self, when: datetime, start: datetime, total: float) -> float:
        width = self.width() - 2 * self.MARGIN
        return self.MARGIN + width * (when - start).total_seconds() / total

    def rects(self) -> list[tuple[QRectF, Segment]]:
        if not self.segments:
            return []
        start, total = self._span()
        out = []
        for s in self.segments:
            left, right = self._x(s.start, start, total), self._x(s.end, start, total)
            top = self.LANE_TOP + (4 if s.kind != RUN else 0)
            height = self.LANE_HEIGHT - (8 if s.kind != RUN else 0)
            out.append((QRectF(left, top, max(2.0, right - left), height), s))
        return out

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = self.palette().color(self.foregroundRole())
        if not self.segments:
            painter.setPen(text)
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no attempts yet")
            return
        for rect, s in self.rects():
            colour = QColor({WAIT: WAIT_COLOUR, BACKOFF: BACKOFF_COLOUR}.get(s.kind)
                            or OUTCOME_COLOURS.get(s.outcome, FAILED_COLOUR))
            brush = QBrush(colour, Qt.BrushStyle.BDiagPattern if s.kind == BACKOFF else Qt.BrushStyle.SolidPattern)
            if s.open_ended:
                colour.setAlpha(150)
                brush.setColor(colour)
            painter.setPen(QPen(colour.darker(120), 1, Qt.PenStyle.DashLine if s.open_ended else Qt.PenStyle.SolidLine))
            painter.setBrush(brush)
            painter.drawRoundedRect(rect, 2, 2)
            if s.kind == RUN:  # the attempt's number and outcome above its run
                painter.setPen(text)
                label = f"#{s.attempt} {s.outcome}"
                if painter.fontMetrics().horizontalAdvance(label) > rect.width() + 40:
                    label = f"#{s.attempt}"
                painter.drawText(QPointF(rect.left(), self.LANE_TOP - 5), label)
        # The axis: the start, the middle and the end, as time since the job was created.
        start, total = self._span()
        y = self.LANE_TOP + self.LANE_HEIGHT + 6
        painter.setPen(QPen(text, 1))
        painter.drawLine(QPointF(self.MARGIN, y), QPointF(self.width() - self.MARGIN, y))
        metrics = painter.fontMetrics()
        for fraction in (0.0, 0.5, 1.0):
            x = self.MARGIN + (self.width() - 2 * self.MARGIN) * fraction
            painter.drawLine(QPointF(x, y), QPointF(x, y + 4))
            label = "0s" if fraction == 0 else "+" + span(total * fraction)
            width = metrics.horizontalAdvance(label)
            left = min(max(x - width / 2, 0), self.width() - width)
            painter.drawText(QPointF(left, y + 6 + metrics.ascent()), label)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            where = QPointF(event.pos())
            hit = next((s for rect, s in self.rects() if rect.adjusted(-2, -6, 2, 6).contains(where)), None)
            if hit is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPos(), hit.describe(), self)
            return True
        return super().event(event)
