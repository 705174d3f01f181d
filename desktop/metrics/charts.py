"""The Metrics tab's charts: a title with its legend above each plot (a label that wraps, so no
key is clipped), the plot, and a line under it that reads the value under the cursor.

Time charts start their y axis at 0 and show, under the cursor, the time of the nearest point and
every series' value there. The latency charts are horizontal bars on a log scale (from about
1 ms to hours: a linear axis would flatten every fast type to nothing, and a log axis has no 0);
each bar carries its value, and the cursor reads a type's p50 and p95."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from datetime import datetime

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")  # pyqtgraph must not pick another binding

import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from jobdesk.core.timefmt import span

LOG_FLOOR = -3.5  # bars of the latency charts start at about 0.3 ms (log10 seconds)
LATENCY_TICKS = [(-3.0, "1 ms"), (-2.0, "10 ms"), (-1.0, "100 ms"), (0.0, "1 s"), (1.0, "10 s"),
                 (math.log10(60), "1 min"), (math.log10(600), "10 min"), (math.log10(3600), "1 h"),
                 (math.log10(36000), "10 h")]
PERCENTILE_COLOURS = {"p50": "#1f6feb", "p95": "#d4a72c"}
HEADROOM = 1.15  # the y axis reaches this much above the highest value
FOOT = 0.04  # and this share of its height below 0
HINT = "point at the chart for its values"


def duration(seconds: float) -> str:
    """A latency as a bar's label reads it: "0.4 ms", "120 ms", "2.50s", "3m07s"."""
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms" if seconds < 0.01 else f"{seconds * 1000:.0f} ms"
    return span(seconds)


class Chart(QWidget):
    """A title and legend, a plot, and the value under the cursor."""

    def __init__(self, title: str, keys: dict[str, str], plot: pg.PlotWidget) -> None:
        super().__init__()
        self.title, self.keys = title, keys
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.plot = plot
        plot.setMouseEnabled(x=False, y=False)
        plot.setMenuEnabled(False)
        plot.hideButtons()
        self.readout = QLabel(HINT)  # the value under the cursor
        self.readout.setObjectName("chartReadout")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addWidget(self.legend)
        layout.addWidget(plot, 1)
        layout.addWidget(self.readout)
        plot.scene().sigMouseMoved.connect(self._moved)

    def set_title(self, title: str) -> None:
        self.title = title
        self.apply_palette(self.palette())

    def apply_palette(self, palette: QPalette) -> None:
        base = palette.color(QPalette.ColorRole.Base)
        text = palette.color(QPalette.ColorRole.Text)
        self.plot.setBackground(base)
        for name in ("left", "bottom"):
            axis = self.plot.getPlotItem().getAxis(name)
            axis.setPen(pg.mkPen(text))
            axis.setTextPen(pg.mkPen(text))
        names = " &nbsp;".join(f"<span style='color:{colour}'>■</span>&nbsp;{name}"
                                for name, colour in self.keys.items())
        self.legend.setText(f"<b>{self.title}</b>&nbsp;&nbsp; {names}")

    def _moved(self, pos: QPointF) -> None:
        item = self.plot.getPlotItem()
        if not item.sceneBoundingRect().contains(pos):
            return
        point = item.vb.mapSceneToView(pos)
        self.readout.setText(self.read_at(point.x(), point.y()))

    def read_at(self, x: float, y: float) -> str:
        """What the chart shows at view coordinates (x, y)."""
        raise NotImplementedError


class CountAxis(pg.AxisItem):
    """A y axis of counts and rates: no label below 0 (the sliver under 0 is only room)."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # type: ignore[type-arg]  # noqa: N802, N803
        ticks = super().tickValues(minVal, maxVal, size)
        return [(spacing, [v for v in values if v >= 0]) for spacing, values in ticks]


class TimeChart(Chart):
    """Lines over time; the y axis from 0, the cursor reading every line at the nearest point."""

    def __init__(self, title: str, keys: dict[str, str], unit: str = "") -> None:
        plot = pg.PlotWidget(axisItems={"bottom": pg.DateAxisItem(orientation="bottom"),
                                        "left": CountAxis(orientation="left")})
        plot.showGrid(x=True, y=True, alpha=0.2)
        super().__init__(title, keys, plot)
        self.unit = unit
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.guide = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#8c959f", width=1,
                                                                             style=Qt.PenStyle.DotLine))
        self.guide.hide()
        plot.addItem(self.guide, ignoreBounds=True)

    def add_curve(self, name: str, pen: QColor | str, *, width: float = 2, z: int = 0,
                  style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> pg.PlotDataItem:
        curve = self.plot.plot(name=name, pen=pg.mkPen(pen, width=width, style=style))
        curve.setZValue(z)
        self.curves[name] = curve
        return curve

    def show_range(self, since: float, until: float) -> None:
        """The x axis over the window, the y axis from 0 to a little above the highest point. A
        sliver below 0 keeps the 0 label (pyqtgraph drops a label on the plot's edge) and a line
        that stays at 0 in sight."""
        self.plot.setXRange(since, until, padding=0.01)
        top = max((max(c.getData()[1]) for c in self.curves.values()
                   if c.getData()[1] is not None and len(c.getData()[1])), default=0.0)
        high = max(1.0, float(top)) * HEADROOM
        self.plot.setYRange(-high * FOOT, high, padding=0)

    def y_range(self) -> tuple[float, float]:
        low, high = self.plot.getPlotItem().vb.viewRange()[1]
        return float(low), float(high)

    def y_labels(self) -> list[float]:
        """The values the y axis labels, lowest first."""
        axis = self.plot.getAxis("left")
        low, high = self.y_range()
        ticks = axis.tickValues(low, high, max(1, int(axis.height())))
        return sorted(float(v) for _spacing, values in ticks for v in values if low <= v <= high)

    def read_at(self, x: float, y: float) -> str:
        first = next(iter(self.curves.values()), None)
        xs = first.getData()[0] if first is not None else None
        if xs is None or not len(xs):
            return HINT
        i = min(range(len(xs)), key=lambda k: abs(xs[k] - x))
        self.guide.setPos(xs[i])
        self.guide.show()
        when = datetime.fromtimestamp(float(xs[i])).strftime("%Y-%m-%d %H:%M")
        values = []
        for name, curve in self.curves.items():
            ys = curve.getData()[1]
            if ys is not None and i < len(ys):
                value = float(ys[i])
                values.append(f"{name} {value:,.1f}{self.unit}" if value % 1 else f"{name} {value:,.0f}{self.unit}")
        return f"{when} · " + " · ".join(values)


class LatencyChart(Chart):
    """p50 and p95 bars per type on a log scale, each labelled with its value."""

    def __init__(self, title: str) -> None:
        plot = pg.PlotWidget()
        plot.showGrid(x=True, alpha=0.2)
        plot.getAxis("bottom").setTicks([LATENCY_TICKS])
        plot.getPlotItem().invertY(True)  # the first type on top
        super().__init__(title, PERCENTILE_COLOURS, plot)
        self.bars: dict[str, pg.BarGraphItem] = {}
        self.types: list[str] = []
        self.values: dict[str, list[float | None]] = {}
        self.labels: list[pg.TextItem] = []
        for i, name in enumerate(PERCENTILE_COLOURS):
            item = pg.BarGraphItem(x0=LOG_FLOOR, y=[], width=[], height=0.38, brush=PERCENTILE_COLOURS[name],
                                   pen=pg.mkPen(None))
            item.offset = -0.2 + 0.4 * i  # type: ignore[attr-defined]
            plot.addItem(item)
            self.bars[name] = item

    def show_values(self, types: Sequence[str], values: dict[str, list[float | None]], text: QColor) -> None:
        """One row per type; `values` holds the seconds of each percentile, by type."""
        self.types, self.values = list(types), values
        for label in self.labels:
            self.plot.removeItem(label)
        self.labels = []
        top = LOG_FLOOR
        for name, item in self.bars.items():
            seconds = values[name]
            widths = [max(0.0, math.log10(v) - LOG_FLOOR) if v else 0.0 for v in seconds]
            item.setOpts(y=[i + item.offset for i in range(len(types))], width=widths, x0=LOG_FLOOR)
            item.seconds = [v for v in seconds]  # type: ignore[attr-defined]  # unscaled
            for i, (v, w) in enumerate(zip(seconds, widths, strict=True)):
                if v:
                    label = pg.TextItem(duration(v), color=text, anchor=(0, 0.5))
                    label.setPos(LOG_FLOOR + w, i + item.offset)
                    self.plot.addItem(label)
                    self.labels.append(label)
                    top = max(top, LOG_FLOOR + w)
        self.plot.getAxis("left").setTicks([list(enumerate(types))])
        self.plot.setYRange(-0.6, max(1, len(types)) - 0.4, padding=0)
        self.plot.setXRange(LOG_FLOOR, max(top + 0.9, -1.0), padding=0)  # room for the labels

    def label_texts(self) -> list[str]:
        return [str(label.textItem.toPlainText()) for label in self.labels]

    def read_at(self, x: float, y: float) -> str:
        i = round(y)
        if not 0 <= i < len(self.types):
            return HINT
        parts = [f"{name} {duration(v) if (v := self.values[name][i]) else '—'}" for name in self.bars]
        return f"{self.types[i]} · " + " · ".join(parts)
