"""Small pictures in table cells: a type's utilisation gauge (running against its limit), its last
5 minutes as a sparkline (jobs finished, failed attempts in red over them), and a schedule's recent
runs as bars coloured by status. Each delegate reads its figures from GLANCE_ROLE and leaves the
cell's text (DisplayRole) to say the same in words, for tooltips, tests and screen readers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from jobdesk.console.theme import STATUS_COLOURS
from jobdesk.core.models import Status

GLANCE_ROLE = Qt.ItemDataRole.UserRole + 21  # the figures a delegate draws
FINISHED_COLOUR = STATUS_COLOURS[Status.COMPLETED][0]
FAILED_COLOUR = STATUS_COLOURS[Status.FAILED][0]
BUSY_COLOUR = "#d4a72c"  # a gauge at 80 % or more
PRUNED_COLOUR = "#8c959f"  # a run whose job was deleted
PAD = 3


def gauge_text(running: int, limit: int | None) -> str:
    """`3 / 4 running`, or `3 running` without a limit."""
    return f"{running} / {limit} running" if limit is not None else f"{running} running"


def gauge_colour(running: int, limit: int | None) -> str:
    if limit is None or limit == 0 or running < 0.8 * limit:
        return FINISHED_COLOUR
    return FAILED_COLOUR if running >= limit else BUSY_COLOUR


def sparkline_text(finished: Sequence[int], failed: Sequence[int]) -> str:
    """`120 done, 3 failed in 5 min`."""
    return f"{sum(finished):,} done, {sum(failed):,} failed in 5 min"


class _CellDelegate(QStyledItemDelegate):
    """The selection's background, then `draw` in the cell less its padding; plain text where
    the cell holds no figures."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        figures = index.data(GLANCE_ROLE)
        if figures is None:
            super().paint(painter, option, index)
            return
        rect = option.rect  # type: ignore[attr-defined]
        if option.state & QStyle.StateFlag.State_Selected:  # type: ignore[attr-defined]
            painter.fillRect(rect, option.palette.highlight())  # type: ignore[attr-defined]
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.draw(painter, QRectF(rect).adjusted(PAD, PAD, -PAD, -PAD), figures, option)
        painter.restore()

    def draw(self, painter: QPainter, box: QRectF, figures: object, option: QStyleOptionViewItem) -> None:
        raise NotImplementedError

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:  # noqa: N802
        hint = super().sizeHint(option, index)
        return QSize(max(hint.width(), 150), hint.height())


def _text_colour(option: QStyleOptionViewItem) -> QColor:
    selected = option.state & QStyle.StateFlag.State_Selected  # type: ignore[attr-defined]
    role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
    return option.palette.color(role)  # type: ignore[attr-defined]


class GaugeDelegate(_CellDelegate):
    """GLANCE_ROLE: (running, limit or None). A track the running jobs fill up to the limit, and
    the words beside it; a type without a limit has no track, only the words."""

    TRACK = 70.0

    def draw(self, painter: QPainter, box: QRectF, figures: object, option: QStyleOptionViewItem) -> None:
        running, limit = cast(tuple[int, int | None], figures)
        track = QRectF(box.x(), box.center().y() - 4, min(self.TRACK, box.width() / 2), 8)
        if limit is not None:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(option.palette.color(QPalette.ColorRole.Mid))  # type: ignore[attr-defined]
            painter.drawRoundedRect(track, 4, 4)
            share = 1.0 if limit == 0 else min(1.0, running / limit)
            if share > 0:
                painter.setBrush(QColor(gauge_colour(running, limit)))
                painter.drawRoundedRect(QRectF(track.x(), track.y(), max(8.0, track.width() * share), 8), 4, 4)
        painter.setPen(_text_colour(option))
        text_box = QRectF(track.right() + 6, box.y(), box.right() - track.right() - 6, box.height())
        painter.drawText(text_box, int(Qt.AlignmentFlag.AlignVCenter), gauge_text(running, limit))

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:  # noqa: N802
        hint = super().sizeHint(option, index)
        figures = index.data(GLANCE_ROLE)
        if figures is None:
            return hint
        text = option.fontMetrics.horizontalAdvance(gauge_text(*figures))  # type: ignore[attr-defined]
        return QSize(int(self.TRACK) + 6 + text + 2 * PAD + 4, hint.height())


class SparklineDelegate(_CellDelegate):
    """GLANCE_ROLE: (finished, failed), two runs of counts, oldest first. One bar per count, in
    one scale; the failed attempts in red over the finished jobs; the totals beside them."""

    def draw(self, painter: QPainter, box: QRectF, figures: object, option: QStyleOptionViewItem) -> None:
        finished, failed = cast(tuple[Sequence[int], Sequence[int]], figures)
        total = f"{sum(finished):,}" + (f" · {sum(failed):,} ✖" if sum(failed) else "")
        text_w = option.fontMetrics.horizontalAdvance(total) + 8  # type: ignore[attr-defined]
        chart = QRectF(box.x(), box.y(), max(30.0, min(240.0, box.width() - text_w)), box.height())
        top = max([*finished, *failed, 1])
        step = chart.width() / max(1, len(finished))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(option.palette.color(QPalette.ColorRole.Mid))  # type: ignore[attr-defined]
        painter.drawRect(QRectF(chart.x(), chart.bottom() - 1, chart.width(), 1))  # the base line
        for colour, counts in ((FINISHED_COLOUR, finished), (FAILED_COLOUR, failed)):
            painter.setBrush(QColor(colour))
            for i, n in enumerate(counts):
                if n:
                    h = max(2.0, chart.height() * n / top)
                    painter.drawRect(QRectF(chart.x() + i * step, chart.bottom() - h, max(1.0, step - 0.5), h))
        painter.setPen(_text_colour(option))
        painter.drawText(QRectF(chart.right() + 6, box.y(), text_w, box.height()),
                         int(Qt.AlignmentFlag.AlignVCenter), total)


class RunsDelegate(_CellDelegate):
    """GLANCE_ROLE: [(status or None, duration_s or None)], oldest first. One bar per run,
    coloured by its status, as high as it ran long against the longest (a run not ended yet, or
    with no duration, is a short bar)."""

    SLOTS = 20

    def draw(self, painter: QPainter, box: QRectF, figures: object, option: QStyleOptionViewItem) -> None:
        runs = list(cast(Sequence[tuple[str | None, float | None]], figures))
        longest = max([d for _, d in runs if d] + [0.001])
        step = min(10.0, box.width() / self.SLOTS)
        painter.setPen(Qt.PenStyle.NoPen)
        for i, (status, duration) in enumerate(runs[-self.SLOTS:]):
            colour = STATUS_COLOURS[Status(status)][0] if status else PRUNED_COLOUR
            share = 0.3 if not duration else 0.3 + 0.7 * duration / longest
            h = box.height() * share
            painter.setBrush(QColor(colour))
            painter.drawRoundedRect(QRectF(box.x() + i * step, box.bottom() - h, step - 2, h), 1, 1)
