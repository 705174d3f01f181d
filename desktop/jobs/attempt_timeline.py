"""A job's attempts on a time axis: waiting in the queue, running, the backoff between one
failed attempt and the next, and a durable processor's suspensions (a sleep or a wait between
one run and the next), each run coloured by its outcome. A durable processor's steps are marks
on the run in which they finished.

`segments()` and `marks()` read them from the job row, its `job_attempts` rows and its stored
steps (pure, tested alone); the widget draws them with QPainter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetrics, QHelpEvent, QPainter, QPaintEvent, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from jobdesk.console.theme import STATUS_COLOURS
from jobdesk.core.models import JobRecord, Status
from jobdesk.core.timefmt import span
from jobdesk.service.jobs import Attempt

WAIT, RUN, BACKOFF, SUSPEND = "wait", "run", "backoff", "suspend"
SUSPENDED = "suspended"  # the outcome of a run that ended in a sleep or a wait (job_attempts)
SUSPEND_COLOUR = "#8250df"
OUTCOME_COLOURS = {"completed": STATUS_COLOURS[Status.COMPLETED][0], "running": STATUS_COLOURS[Status.IN_PROGRESS][0],
                   "waiting_approval": STATUS_COLOURS[Status.WAITING_APPROVAL][0],
                   "cancelled": STATUS_COLOURS[Status.CANCELLED][0], SUSPENDED: SUSPEND_COLOUR}
FAILED_COLOUR = STATUS_COLOURS[Status.FAILED][0]  # failed, lost, interrupted: the attempt did not finish
WAIT_COLOUR, BACKOFF_COLOUR = "#8c959f", "#d4a72c"
GAP_COLOURS = {WAIT: WAIT_COLOUR, BACKOFF: BACKOFF_COLOUR, SUSPEND: SUSPEND_COLOUR}
GAP_BRUSHES = {BACKOFF: Qt.BrushStyle.BDiagPattern, SUSPEND: Qt.BrushStyle.Dense5Pattern}


@dataclass(frozen=True)
class Segment:
    kind: str  # wait, run, backoff or suspend
    attempt: int
    start: datetime
    end: datetime
    outcome: str = ""  # of a run: completed, failed, lost, suspended … or running; of a suspension: why
    open_ended: bool = False  # still going (ends now), or a retry that is still due

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())

    def describe(self) -> str:
        what = {WAIT: "waited in the queue", BACKOFF: "backoff before the retry",
                SUSPEND: f"suspended, {self.outcome or 'waiting'}", RUN: f"ran: {self.outcome}"}[self.kind]
        more = " (so far)" if self.open_ended and self.kind != BACKOFF else " (due)" if self.open_ended else ""
        return f"attempt {self.attempt}: {what}, {span(self.seconds)}{more}"


def segments(job: JobRecord, attempts: list[Attempt], now: datetime, wake_at: datetime | None = None) -> list[Segment]:
    """Wait, run, backoff and suspension segments in time order. The finished attempts come from
    `job_attempts`; the current one (running, or the one that completed) from the job row.
    `wake_at` is when a suspended job is due to run again, if it is known."""
    out: list[Segment] = []
    previous_end = job.created_at
    gap, why = WAIT, ""  # what the time before the next run is: a wait, a backoff or a suspension
    for a in sorted(attempts, key=lambda a: (a.attempt, a.finished_at)):
        start = a.started_at or a.finished_at
        if start > previous_end:
            out.append(Segment(gap, a.attempt, previous_end, start, why))
        out.append(Segment(RUN, a.attempt, start, a.finished_at, a.outcome))
        previous_end = max(previous_end, a.finished_at)
        gap, why = (SUSPEND, a.error_message or "") if a.outcome == SUSPENDED else (BACKOFF, "")
    number = (max((a.attempt for a in attempts), default=0)) + 1
    current_run = job.started_at is not None and job.started_at >= previous_end and job.status in (
        Status.IN_PROGRESS, Status.COMPLETED, Status.WAITING_APPROVAL)
    if current_run:
        assert job.started_at is not None
        if job.started_at > previous_end:
            out.append(Segment(gap, number, previous_end, job.started_at, why))
        running = job.status == Status.IN_PROGRESS
        end = now if running or job.completed_at is None else job.completed_at
        outcome = "running" if running else job.status.value
        out.append(Segment(RUN, number, job.started_at, max(end, job.started_at), outcome, open_ended=running))
    elif job.status == Status.QUEUED:
        due = wake_at if gap == SUSPEND else job.next_retry_at
        if due is not None and due > now and due.year < 9999:
            out.append(Segment(gap, number, previous_end, due, why, open_ended=True))
        elif now > previous_end:
            out.append(Segment(gap, number, previous_end, now, why, open_ended=True))
    return out


class StepLike(Protocol):
    """What the timeline needs of a stored step (`JobDetail.steps`)."""

    @property
    def name(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def finished_at(self) -> datetime: ...


@dataclass(frozen=True)
class Mark:
    """A durable processor's step, marked where it finished; checkpoints are its sleeps and waits."""

    name: str
    attempt: int
    at: datetime

    @property
    def checkpoint(self) -> bool:
        return self.name.startswith("@")

    def describe(self) -> str:
        what = "checkpoint" if self.checkpoint else "step"
        return f"attempt {self.attempt}: {what} {self.name} finished"


def marks(steps: Sequence[StepLike]) -> list[Mark]:
    """The steps as marks, in the order they finished."""
    return sorted((Mark(s.name, s.attempt, s.finished_at) for s in steps), key=lambda m: m.at)


def _colour(s: Segment) -> QColor:
    """A segment's colour: its gap's kind, or its run's outcome."""
    return QColor(GAP_COLOURS.get(s.kind) or OUTCOME_COLOURS.get(s.outcome, FAILED_COLOUR))


class AttemptTimeline(QWidget):
    """Draws `segments` on one lane with a time axis below, and the steps as diamonds on the runs
    they finished in (hollow for the checkpoints of sleeps and waits); hover says what each was."""

    LANE_TOP, LANE_HEIGHT, MARGIN = 22, 18, 8
    LABEL_GAP = 6  # pixels between two labels above the lane

    def __init__(self) -> None:
        super().__init__()
        self.segments: list[Segment] = []
        self.marks: list[Mark] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(400, 70)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(120, 70)

    def show_segments(self, items: list[Segment], step_marks: Sequence[Mark] = ()) -> None:
        self.segments = items
        self.marks = list(step_marks) if items else []
        self.update()

    def _span(self) -> tuple[datetime, float]:
        start = self.segments[0].start
        end = max(s.end for s in self.segments)
        return start, max((end - start).total_seconds(), 1e-3)

    def mark_points(self) -> list[tuple[QPointF, Mark]]:
        """Where each step's diamond goes: on the lane, at the time it finished."""
        if not self.segments:
            return []
        start, total = self._span()
        low, high = float(self.MARGIN), float(self.width() - self.MARGIN)
        y = self.LANE_TOP + self.LANE_HEIGHT / 2
        return [(QPointF(min(max(self._x(m.at, start, total), low), high), y), m) for m in self.marks]

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
            colour = _colour(s)
            brush = QBrush(colour, GAP_BRUSHES.get(s.kind, Qt.BrushStyle.SolidPattern))
            if s.open_ended:
                colour.setAlpha(150)
                brush.setColor(colour)
            painter.setPen(QPen(colour.darker(120), 1, Qt.PenStyle.DashLine if s.open_ended else Qt.PenStyle.SolidLine))
            painter.setBrush(brush)
            painter.drawRoundedRect(rect, 2, 2)
        for x, label, s in self.labels():
            painter.setPen(text if s.kind == RUN else _colour(s).darker(130))
            painter.drawText(QPointF(x, self.LANE_TOP - 5), label)
        self._paint_marks(painter)
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

    def labels(self) -> list[tuple[float, str, Segment]]:
        """The labels above the lane, left to right, none over another or past the edge: each
        run's number and outcome (or its number alone where that is all there is room for), and
        why a suspension waited, centred over it where it is wide enough."""
        metrics = QFontMetrics(self.font())
        out: list[tuple[float, str, Segment]] = []
        taken = -float(self.LABEL_GAP)  # where the last label drawn ends
        for rect, s in self.rects():
            if s.kind == RUN:
                long = f"#{s.attempt} {s.outcome.replace('_', ' ')}"
                choices = [long] if metrics.horizontalAdvance(long) <= rect.width() + 40 else []
                for label in [*choices, f"#{s.attempt}"]:
                    width = metrics.horizontalAdvance(label)
                    x = min(max(rect.left(), taken + self.LABEL_GAP), self.width() - width)
                    if x >= taken + self.LABEL_GAP and x - rect.left() <= 40:
                        out.append((x, label, s))
                        taken = x + width
                        break
            elif s.kind == SUSPEND and s.outcome:
                width = metrics.horizontalAdvance(s.outcome)
                x = rect.center().x() - width / 2
                if width < rect.width() - 40 and x >= taken + self.LABEL_GAP:
                    out.append((x, s.outcome, s))
                    taken = x + width
        return out

    def _paint_marks(self, painter: QPainter) -> None:
        outline = QColor("#24292f")
        for point, mark in self.mark_points():
            r = 4.0
            diamond = QPolygonF([QPointF(point.x(), point.y() - r), QPointF(point.x() + r, point.y()),
                                 QPointF(point.x(), point.y() + r), QPointF(point.x() - r, point.y())])
            painter.setPen(QPen(outline, 1))
            painter.setBrush(QBrush(QColor("#ffffff") if mark.checkpoint else outline))
            painter.drawPolygon(diamond)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            where = QPointF(event.pos())
            hit: Segment | Mark | None = next(
                (m for p, m in self.mark_points() if abs(p.x() - where.x()) <= 4 and abs(p.y() - where.y()) <= 6), None)
            if hit is None:
                hit = next((s for rect, s in self.rects() if rect.adjusted(-2, -6, 2, 6).contains(where)), None)
            if hit is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPos(), hit.describe(), self)
            return True
        return super().event(event)
