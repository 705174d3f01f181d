"""The Metrics tab: throughput, queue depth and wait/run percentiles per type (`charts`), over a
range the user picks and for every type or one, read again every few seconds while shown."""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QPalette, QShowEvent
from PySide6.QtWidgets import QComboBox, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.metrics.charts import LatencyChart, TimeChart
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import STATUS_COLOURS
from jobdesk.core.models import Status
from jobdesk.store.stats import QUEUE_STATUSES, Metrics, Window, parse_window
from jobdesk.store.table_size import COUNTED_ROWS_CAP, TableSize

log = logging.getLogger("jobdesk.console")

REFRESH_MS = 5000  # while the tab is shown
# The live queue depth is counted from `jobs`, a read that grows with the queue: the next refresh
# waits at least this many times as long as the last read took, so that an open Metrics tab keeps
# to about 1 % of the database's time however deep the queue is.
PACE = 100
WINDOW_LABELS = {"Last 15 minutes": "15m", "Last hour": "1h", "Last 6 hours": "6h", "Last 24 hours": "24h",
                 "Last 7 days": "7d", "Last 30 days": "30d"}
DEFAULT_WINDOW = "Last hour"
ALL_TYPES = "All types"
DEPTH_NAMES = {"queued": "queued", "in_progress": "running", "waiting_approval": "waiting approval"}
# The running line is drawn wide and below, the waiting-approval one dashed above it: where they
# hold the same value (often 0), both still show.
DEPTH_PENS = {"queued": (2.0, 1, Qt.PenStyle.SolidLine), "in_progress": (4.0, 0, Qt.PenStyle.SolidLine),
              "waiting_approval": (2.0, 2, Qt.PenStyle.DashLine)}


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
        self._reload = False  # the range or the type changed during a read: read again after it

        self.window_combo = QComboBox()
        self.window_combo.addItems(list(WINDOW_LABELS))
        self.window_combo.setCurrentText(DEFAULT_WINDOW)
        self.window_combo.currentIndexChanged.connect(lambda _i: self.refresh(changed=True))
        self.type_combo = QComboBox()  # every type, or one: the types seen in the readings are offered
        self.type_combo.setEditable(True)
        self.type_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.type_combo.addItem(ALL_TYPES)
        self.type_combo.setMinimumContentsLength(16)
        self.type_combo.activated.connect(lambda _i: self.refresh(changed=True))
        edit = self.type_combo.lineEdit()
        if edit is not None:
            edit.returnPressed.connect(lambda: self.refresh(changed=True))
        self.summary = QLabel("")
        self.summary.setObjectName("metricsSummary")
        self.summary.setWordWrap(True)
        bar = QHBoxLayout()
        for widget in (QLabel("Range"), self.window_combo, QLabel("Type"), self.type_combo):
            bar.addWidget(widget)
        bar.addSpacing(12)
        bar.addWidget(self.summary, 1)

        self.throughput_chart = TimeChart("Jobs per minute", {"completed": "#2da44e", "failed": "#cf222e"}, "/min")
        self.completed_curve = self.throughput_chart.add_curve("completed", "#2da44e")
        self.failed_curve = self.throughput_chart.add_curve("failed", "#cf222e", z=1)
        self.depth_chart = TimeChart("Queue depth", {DEPTH_NAMES[s]: _colour(s) for s in QUEUE_STATUSES})
        self.depth_curves = {s: self.depth_chart.add_curve(DEPTH_NAMES[s], _colour(s), width=DEPTH_PENS[s][0],
                                                     z=DEPTH_PENS[s][1], style=DEPTH_PENS[s][2])
                             for s in QUEUE_STATUSES}
        self.wait_chart = LatencyChart("Wait time per type")
        self.run_chart = LatencyChart("Run time per type")
        self.throughput_plot, self.depth_plot = self.throughput_chart.plot, self.depth_chart.plot
        self.wait_plot, self.run_plot = self.wait_chart.plot, self.run_chart.plot

        grid = QGridLayout()
        for i, chart in enumerate(self.charts()):
            grid.addWidget(chart, i // 2, i % 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(bar)
        layout.addLayout(grid, 1)

        self._timer = QTimer(self, interval=REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self.apply_palette()

    # -- charts -----------------------------------------------------------------------------

    def charts(self) -> list[TimeChart | LatencyChart]:
        return [self.throughput_chart, self.depth_chart, self.wait_chart, self.run_chart]

    def plots(self) -> list:  # type: ignore[type-arg]
        return [chart.plot for chart in self.charts()]

    def apply_palette(self) -> None:
        """Follow the light or dark style: the chart background, axes and titles take its colours."""
        for chart in self.charts():
            chart.apply_palette(self.palette())

    # -- live reading -----------------------------------------------------------------------

    @property
    def time_window(self) -> Window:
        return parse_window(WINDOW_LABELS[self.window_combo.currentText()])

    @property
    def job_type(self) -> str | None:
        text = self.type_combo.currentText().strip()
        return None if text in ("", ALL_TYPES) else text

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

    def refresh(self, *, changed: bool = False) -> None:
        if not self.active:
            return
        if self._loading:
            self._reload = self._reload or changed
            return
        spawn(self._load(), "metrics")

    async def _load(self) -> None:
        self._loading = True
        window, job_type = self.time_window, self.job_type
        started = time.monotonic()
        try:
            metrics = await self.connection.run(lambda jobs: jobs.metrics(window, job_type))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.message.emit(f"metrics: {reason(exc)}")
            return
        finally:
            self._loading = False
        self._timer.setInterval(max(REFRESH_MS, int((time.monotonic() - started) * 1000 * PACE)))
        self.show_metrics(metrics, job_type)
        if self._reload:
            self._reload = False
            self.refresh()

    def show_metrics(self, metrics: Metrics, job_type: str | None = None) -> None:
        self.metrics = metrics
        tp = metrics.throughput
        x = [t.timestamp() + tp.step.total_seconds() / 2 for t in tp.times]
        self.completed_curve.setData(x, tp.per_minute(tp.completed))
        self.failed_curve.setData(x, tp.per_minute(tp.failed))
        depth_x = [t.timestamp() + tp.step.total_seconds() for t in metrics.depth.times]
        for status, curve in self.depth_curves.items():
            curve.setData(depth_x, metrics.depth.series.get(status, []))
        for chart in (self.throughput_chart, self.depth_chart):
            chart.show_range(metrics.since.timestamp(), metrics.until.timestamp())
        self.throughput_chart.set_title(f"Jobs per minute · {job_type}" if job_type else "Jobs per minute")
        self.depth_chart.set_title("Queue depth · all types" if job_type else "Queue depth")
        self._show_latency(metrics)
        self._offer_types([lat.type for lat in metrics.latency])
        minutes = metrics.window.span.total_seconds() / 60
        queue = metrics.depth.now
        self.summary.setText(
            f"{metrics.completed:,} completed ({metrics.completed / minutes:.1f}/min) · "
            f"{metrics.failed:,} failed · {queue.get('queued', 0):,} queued · "
            f"{queue.get('in_progress', 0):,} running · {queue.get('waiting_approval', 0):,} waiting approval")
        self.loaded.emit()

    def _offer_types(self, types: list[str]) -> None:
        known = {self.type_combo.itemText(i) for i in range(self.type_combo.count())}
        for type_ in sorted(set(types) - known):
            self.type_combo.addItem(type_)

    def _show_latency(self, metrics: Metrics) -> None:
        types = [lat.type for lat in metrics.latency]
        text = self.palette().color(QPalette.ColorRole.Text)
        for chart, prefix in ((self.wait_chart, "wait"), (self.run_chart, "run")):
            values = {name: [getattr(lat, f"{prefix}_{name}") for lat in metrics.latency] for name in chart.bars}
            chart.show_values(types, values, text)

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
        for prefix, chart in (("wait", self.wait_chart), ("run", self.run_chart)):
            for name, item in chart.bars.items():
                out[f"{prefix}.{name}"] = list(getattr(item, "seconds", []))
        return out


def describe_size(size: TableSize | None, listed: int | None = None) -> str:
    """The status bar's words for the jobs table: "jobs: 5 rows · 0.2 MB", "jobs: ≈ 1,000,000 rows · 412 MB".

    `listed`: the number of jobs the jobs list counts (its All chip), when its filter narrows
    nothing and the count is exact: that is the table's rows, and the bar says the same number
    as the list. Otherwise the rows are read now and then (every 30 s) and may be behind what the
    list shows, so the words say it is an estimate (≈): PostgreSQL's own estimate
    (pg_class.reltuples), or before the table's first analysis a count as of the last read."""
    if listed is not None:
        rows = f"{listed:,} row{'' if listed == 1 else 's'}"
    elif size is None:
        rows = "rows unknown"
    elif size.estimated_rows is not None:
        rows = f"≈ {size.estimated_rows:,} rows"
    elif size.counted_rows is not None:  # not analysed yet: counted instead
        counted = size.counted_rows
        plural = "" if counted == 1 else "s"
        rows = f"{COUNTED_ROWS_CAP:,}+ rows" if size.counted_past_cap else f"≈ {counted:,} row{plural}"
    else:
        rows = "rows unknown"
    if size is None:
        return f"jobs: {rows}"
    mb = size.total_bytes / 1_000_000
    shown = f"{mb:,.0f} MB" if mb >= 10 else f"{mb:.1f} MB"
    pruned = ""
    if size.last_prune is not None and size.last_prune.dropped_partitions:
        prune = size.last_prune
        at = prune.at.astimezone().strftime("%H:%M")
        pruned = f" · pruned {at}: {prune.dropped_partitions} partition{'' if prune.dropped_partitions == 1 else 's'}"
    return f"jobs: {rows} · {shown}{pruned}"


def describe_retention(size: TableSize | None) -> str:
    """The tooltip's words for retention: the partitions of completed jobs, and what the last
    run dropped and deleted."""
    if size is None:
        return ""
    text = f"{size.partitions} partitions of completed jobs, dropped whole once past their retention"
    if size.last_prune is not None:
        text += f"\nLast prune, {size.last_prune.at.astimezone():%Y-%m-%d %H:%M}: {size.last_prune.describe()}"
    return text


class TableSizeLabel(QLabel):
    """A status-bar label with the jobs table's estimated rows and on-disk size, read now and then."""

    INTERVAL_MS = 30_000
    WHAT = ("Rows of the jobs table: as the jobs list counts them while it shows every job; "
            "else (≈) estimated from pg_class.reltuples, or counted, up to "
            f"{COUNTED_ROWS_CAP:,}, before its first analysis, every 30 s. "
            "And its on-disk size with indexes (pg_total_relation_size), every partition included")

    def __init__(self, connection: ConsoleConnection) -> None:
        super().__init__("")
        self.connection = connection
        self.setToolTip(self.WHAT)
        self.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self._timer = QTimer(self, interval=self.INTERVAL_MS)
        self._timer.timeout.connect(self.refresh)
        self._size: TableSize | None = None  # as last read
        self._listed: int | None = None  # the jobs list's exact count of every job; None while it filters

    def set_listed(self, listed: int | None) -> None:
        """The jobs list's exact count of every job (see `JobsTab.every_job_count`), shown as the
        table's rows, so that the bar and the list agree; None while the list filters or caps."""
        self._listed = listed
        self._show()

    def _show(self) -> None:
        if self._size is not None or self._listed is not None:
            self.setText(describe_size(self._size, self._listed))
            retention = describe_retention(self._size)
            self.setToolTip(f"{self.WHAT}\n{retention}" if retention else self.WHAT)

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
        self._size = size
        self._show()
