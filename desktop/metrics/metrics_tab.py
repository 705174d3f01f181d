"""The Metrics tab: throughput, queue depth and wait/run percentiles per type, drawn with
pyqtgraph over the last hour, 24 hours or 7 days, and read again every few seconds while shown."""

from __future__ import annotations

import logging
import math
import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")  # pyqtgraph must not pick another binding

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QPalette, QShowEvent
from PySide6.QtWidgets import QComboBox, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import STATUS_COLOURS
from jobdesk.core.models import Status
from jobdesk.store.stats import QUEUE_STATUSES, WINDOWS, Metrics, TableSize, Window

log = logging.getLogger("jobdesk.console")

REFRESH_MS = 5000  # while the tab is shown
WINDOW_LABELS = {"Last hour": "1h", "Last 24 hours": "24h", "Last 7 days": "7d"}
LOG_FLOOR = -3.5  # bars of the latency charts start at about 0.3 ms (log10 seconds)
LATENCY_TICKS = [(-3.0, "1 ms"), (-2.0, "10 ms"), (-1.0, "100 ms"), (0.0, "1 s"), (1.0, "10 s"),
                 (math.log10(60), "1 min"), (math.log10(600), "10 min"), (math.log10(3600), "1 h"),
                 (math.log10(36000), "10 h")]
DEPTH_NAMES = {"queued": "queued", "in_progress": "running", "waiting_approval": "waiting approval"}
PERCENTILE_COLOURS = {"p50": "#1f6feb", "p95": "#d4a72c"}


def _colour(status: str) -> str:
    return STATUS_COLOURS[Status(status)][0]


class MetricsTab(QWidget):
    """Four charts fed by `JobService.metrics`; they hold the last values read (see `series`)."""

    message = Signal(str)
    loaded = Signal()  # the charts show a fresh read

    def __init__(self, connection: ConsoleConnection) -> None:
        super().__init__()
        self.connection = connection
        self.active = False
        self.metrics: Metrics | None = None
        self._loading = False

        self.window_combo = QComboBox()
        self.window_combo.addItems(list(WINDOW_LABELS))
        self.window_combo.currentIndexChanged.connect(lambda _i: self.refresh())
        self.summary = QLabel("")
        self.summary.setObjectName("metricsSummary")
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Window"))
        bar.addWidget(self.window_combo)
        bar.addSpacing(12)
        bar.addWidget(self.summary, 1)

        self.throughput_plot = self._time_plot("Jobs per minute", {"completed": "#2da44e", "failed": "#cf222e"})
        self.completed_curve = self.throughput_plot.plot(name="completed", pen=pg.mkPen("#2da44e", width=2))
        self.failed_curve = self.throughput_plot.plot(name="failed", pen=pg.mkPen("#cf222e", width=2))
        self.depth_plot = self._time_plot("Queue depth", {DEPTH_NAMES[s]: _colour(s) for s in QUEUE_STATUSES})
        self.depth_curves = {s: self.depth_plot.plot(name=DEPTH_NAMES[s], pen=pg.mkPen(_colour(s), width=2))
                             for s in QUEUE_STATUSES}
        self.wait_plot, self.wait_bars = self._latency_plot("Wait time per type")
        self.run_plot, self.run_bars = self._latency_plot("Run time per type")

        grid = QGridLayout()
        grid.addWidget(self.throughput_plot, 0, 0)
        grid.addWidget(self.depth_plot, 0, 1)
        grid.addWidget(self.wait_plot, 1, 0)
        grid.addWidget(self.run_plot, 1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(bar)
        layout.addLayout(grid, 1)

        self._timer = QTimer(self, interval=REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self.apply_palette()

    # -- charts -----------------------------------------------------------------------------

    def _time_plot(self, title: str, keys: dict[str, str]) -> pg.PlotWidget:
        plot = pg.PlotWidget(axisItems={"bottom": pg.DateAxisItem(orientation="bottom")})
        plot.keys = (title, keys)  # type: ignore[attr-defined]  # the title names the series in their colours
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.setMouseEnabled(x=False, y=False)
        plot.setMenuEnabled(False)
        plot.getPlotItem().setLimits(yMin=0)
        return plot

    def _latency_plot(self, title: str) -> tuple[pg.PlotWidget, dict[str, pg.BarGraphItem]]:
        # Horizontal bars on a log scale: one row per type, so long type names stay readable.
        plot = pg.PlotWidget()
        plot.keys = (title, PERCENTILE_COLOURS)  # type: ignore[attr-defined]
        plot.showGrid(x=True, alpha=0.2)
        plot.setMouseEnabled(x=False, y=False)
        plot.setMenuEnabled(False)
        plot.getAxis("bottom").setTicks([LATENCY_TICKS])
        plot.getPlotItem().invertY(True)  # the first type on top
        bars = {}
        for i, name in enumerate(PERCENTILE_COLOURS):
            item = pg.BarGraphItem(x0=LOG_FLOOR, y=[], width=[], height=0.38, brush=PERCENTILE_COLOURS[name],
                                   pen=pg.mkPen(None))
            item.offset = -0.2 + 0.4 * i  # type: ignore[attr-defined]
            plot.addItem(item)
            bars[name] = item
        return plot, bars

    def apply_palette(self) -> None:
        """Follow the light or dark style: the chart background, axes and titles take its colours."""
        palette = self.palette()
        base = palette.color(QPalette.ColorRole.Base)
        text = palette.color(QPalette.ColorRole.Text)
        for plot in self.plots():
            plot.setBackground(base)
            item = plot.getPlotItem()
            for axis in ("left", "bottom"):
                ax = item.getAxis(axis)
                ax.setPen(pg.mkPen(text))
                ax.setTextPen(pg.mkPen(text))
            title, keys = plot.keys
            names = " ".join(f"<span style='color:{colour}'>■ {name}</span>" for name, colour in keys.items())
            item.setTitle(f"<b>{title}</b>&nbsp;&nbsp; {names}", color=text.name(), size="10pt")

    def plots(self) -> list[pg.PlotWidget]:
        return [self.throughput_plot, self.depth_plot, self.wait_plot, self.run_plot]

    # -- live reading -----------------------------------------------------------------------

    @property
    def time_window(self) -> Window:
        return WINDOWS[WINDOW_LABELS[self.window_combo.currentText()]]

    def set_active(self, active: bool) -> None:
        self.active = active
        if active and self.isVisible():
            self.refresh()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802
        # Read only while somebody looks: a hidden tab costs the database nothing.
        super().showEvent(event)
        self._timer.start()
        self.refresh()

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802
        super().hideEvent(event)
        self._timer.stop()

    def stop_timers(self) -> None:
        self._timer.stop()

    def refresh(self) -> None:
        if self.active and not self._loading:
            spawn(self._load(), "metrics")

    async def _load(self) -> None:
        self._loading = True
        window = self.time_window
        try:
            metrics = await self.connection.run(lambda jobs: jobs.metrics(window))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.message.emit(f"metrics: {reason(exc)}")
            return
        finally:
            self._loading = False
        self.show_metrics(metrics)

    def show_metrics(self, metrics: Metrics) -> None:
        self.metrics = metrics
        tp = metrics.throughput
        x = [t.timestamp() + tp.step.total_seconds() / 2 for t in tp.times]
        self.completed_curve.setData(x, tp.per_minute(tp.completed))
        self.failed_curve.setData(x, tp.per_minute(tp.failed))
        depth_x = [t.timestamp() + tp.step.total_seconds() for t in metrics.depth.times]
        for status, curve in self.depth_curves.items():
            curve.setData(depth_x, metrics.depth.series.get(status, []))
        for plot in (self.throughput_plot, self.depth_plot):
            plot.setXRange(metrics.since.timestamp(), metrics.until.timestamp(), padding=0.01)
        self._show_latency(metrics)
        minutes = metrics.window.span.total_seconds() / 60
        queue = metrics.depth.now
        self.summary.setText(
            f"{metrics.completed:,} completed ({metrics.completed / minutes:.1f}/min) · "
            f"{metrics.failed:,} failed · {queue.get('queued', 0):,} queued · "
            f"{queue.get('in_progress', 0):,} running · {queue.get('waiting_approval', 0):,} waiting approval")
        self.loaded.emit()

    def _show_latency(self, metrics: Metrics) -> None:
        types = [lat.type for lat in metrics.latency]
        ticks = [list(enumerate(types))]
        for plot, bars, prefix in ((self.wait_plot, self.wait_bars, "wait"), (self.run_plot, self.run_bars, "run")):
            for name, item in bars.items():
                values = [getattr(lat, f"{prefix}_{name}") for lat in metrics.latency]
                widths = [max(0.0, math.log10(v) - LOG_FLOOR) if v else 0.0 for v in values]
                item.setOpts(y=[i + item.offset for i in range(len(types))], width=widths, x0=LOG_FLOOR)
                item.seconds = values  # type: ignore[attr-defined]  # what the bars stand for, unscaled
            plot.getAxis("left").setTicks(ticks)
            plot.setYRange(-0.6, max(1, len(types)) - 0.4, padding=0)
            top = max([math.log10(v) for lat in metrics.latency
                       for v in (getattr(lat, f"{prefix}_p95"),) if v] or [0.0])
            plot.setXRange(LOG_FLOOR, max(top + 0.3, -1.0), padding=0)

    def series(self) -> dict[str, list[float]]:
        """The plotted values, by name (for tests and the screenshot check)."""
        out: dict[str, list[float]] = {
            "completed": list(self.completed_curve.getData()[1] if self.completed_curve.getData()[1] is not None
                              else []),
            "failed": list(self.failed_curve.getData()[1] if self.failed_curve.getData()[1] is not None else []),
        }
        for status, curve in self.depth_curves.items():
            y = curve.getData()[1]
            out[f"depth.{status}"] = list(y) if y is not None else []
        for prefix, bars in (("wait", self.wait_bars), ("run", self.run_bars)):
            for name, item in bars.items():
                out[f"{prefix}.{name}"] = list(getattr(item, "seconds", []))
        return out


def describe_size(size: TableSize) -> str:
    """The status bar's words for the jobs table: "jobs ≈ 1,000,000 rows · 412 MB"."""
    rows = f"≈ {size.estimated_rows:,} rows" if size.estimated_rows is not None else "rows not estimated yet"
    mb = size.total_bytes / 1_000_000
    shown = f"{mb:,.0f} MB" if mb >= 10 else f"{mb:.1f} MB"
    return f"jobs: {rows} · {shown}"


class TableSizeLabel(QLabel):
    """A status-bar label with the jobs table's estimated rows and on-disk size, read now and then."""

    INTERVAL_MS = 30_000

    def __init__(self, connection: ConsoleConnection) -> None:
        super().__init__("")
        self.connection = connection
        self.setToolTip("Estimated rows (pg_class.reltuples) and on-disk size with indexes "
                        "(pg_total_relation_size) of the jobs table")
        self.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self._timer = QTimer(self, interval=self.INTERVAL_MS)
        self._timer.timeout.connect(self.refresh)

    def set_active(self, active: bool) -> None:
        if active:
            self._timer.start()
            self.refresh()
        else:
            self._timer.stop()

    def stop_timers(self) -> None:
        self._timer.stop()

    def refresh(self) -> None:
        spawn(self._load(), "table-size")

    async def _load(self) -> None:
        try:
            size = await self.connection.run(lambda jobs: jobs.table_size())
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("table size failed: %s", reason(exc))
            return
        self.setText(describe_size(size))
