"""The console window: banner, filters, the live job table and the detail panes."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from PySide6.QtCore import QItemSelection, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from desktop.connection import ConsoleConnection
from desktop.connection_dialog import ConnectionDialog, ProfileStore
from desktop.jobs.job_actions import JobActions
from desktop.jobs.job_detail import JobDetail
from desktop.jobs.job_table_model import COL_ID, COL_STATUS, JobTableModel
from desktop.jobs.status_delegate import StatusChipDelegate
from desktop.list_table import list_table
from desktop.pipelines.pipelines_tab import PipelinesTab
from desktop.status_filter import checked, status_buttons
from desktop.tasks import spawn
from desktop.theme import STATUS_COLOURS, icon, status_label
from desktop.workers.workers_controller import WorkersController
from worker.job_queries import JobFilter, StatusCounts
from worker.models import Status, short_id

log = logging.getLogger("jobdesk.console")

TIME_RANGES = {"Any time": None, "Last hour": timedelta(hours=1), "Last 24 hours": timedelta(days=1),
               "Last 7 days": timedelta(days=7)}


class MainWindow(QMainWindow):
    switch_requested = Signal(object, object)  # (Profile or None for embedded, URL with password)

    def __init__(self, connection: ConsoleConnection, *, production: bool = False) -> None:
        super().__init__()
        self.connection = connection
        self.production = production
        self.resize(1280, 800)
        self.setWindowIcon(icon("jobdesk"))

        self.model = JobTableModel(connection.run)
        self.model.failed.connect(self._query_failed)
        self.table = list_table(self.model, (80, 140, 130, 80, 50, 50, 80, 80, 80, 80, 200), multi_select=True)
        self.table.setSortingEnabled(True)
        self.table.horizontalHeader().setSortIndicator(COL_ID, Qt.SortOrder.DescendingOrder)
        self.table.setItemDelegateForColumn(COL_STATUS, StatusChipDelegate(self.table))
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)

        self.detail = JobDetail()
        self.detail.job_link_clicked.connect(self.select_job)
        self.detail.pipeline_link_clicked.connect(self.show_pipeline)
        self.detail.pipeline_graph_clicked.connect(self.show_pipeline_graph)
        self.job_actions = JobActions(self, connection.run)
        self.job_actions.message.connect(self._show_message)
        self.job_actions.error.connect(self._show_error)
        self.job_actions.done.connect(lambda ids: self._changed(set(ids)))
        self.pipelines = PipelinesTab(connection, self.job_actions)
        self.pipelines.job_clicked.connect(self._node_clicked)
        self.pipelines.graph_shown.connect(self._sync_actions)
        self.pipelines.pipeline_jobs_requested.connect(self.show_pipeline)
        self.pipelines.job_activated.connect(self.activate_job)
        self.pipelines.message.connect(self._show_message)
        self._pending_select: str | None = None
        self.model.loaded.connect(self._select_pending)

        self.workers = WorkersController(self, connection)  # Workers dock, worker log, Launch worker
        self.workers.job_link_clicked.connect(self.select_job)
        self.workers.message.connect(self._show_message)

        self.banner = QLabel()
        self.banner.setObjectName("banner")
        self.banner.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.read_only_label = QLabel("read-only")
        self.read_only_label.setObjectName("readOnly")

        toolbar = QToolBar("Actions")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        for action in self.job_actions.actions.values():
            toolbar.addAction(action)
        toolbar.addSeparator()
        refresh = QAction(icon("refresh"), "Refresh", self)
        refresh.setShortcut(QKeySequence.StandardKey.Refresh)
        refresh.triggered.connect(self.model.reload)
        toolbar.addAction(refresh)
        connect_action = QAction(icon("connect"), "Connect…", self)
        connect_action.setShortcut(QKeySequence("Ctrl+O"))
        connect_action.setToolTip("Switch to another database (Ctrl+O)")
        connect_action.triggered.connect(self.choose_connection)
        toolbar.addAction(connect_action)
        toolbar.addAction(self.workers.launch_action)
        self.read_only_action = toolbar.addWidget(self.read_only_label)
        self.read_only_action.setVisible(False)
        self.addToolBar(toolbar)

        filters = QHBoxLayout()
        self.status_buttons = status_buttons({s: STATUS_COLOURS[s][0] for s in Status}, filters,
                                             self._apply_filters)
        filters.addStretch(1)
        fields = QHBoxLayout()  # a second row, so the window still fits a 1280-pixel screen
        self.type_edit = self._filter_edit("type", 110)
        self.pipeline_edit = self._filter_edit("pipeline id", 110)
        self.user_edit = self._filter_edit("user", 60)
        self.search_edit = self._filter_edit("search id, type, error, input", 220)
        self.time_combo = QComboBox()
        self.time_combo.addItems(list(TIME_RANGES))
        self.time_combo.currentIndexChanged.connect(self._apply_filters)
        for widget in (self.type_edit, self.pipeline_edit, self.user_edit, self.time_combo):
            fields.addWidget(widget)
        fields.addWidget(self.search_edit, 1)

        jobs_page = QWidget()
        jobs_layout = QVBoxLayout(jobs_page)
        jobs_layout.setContentsMargins(0, 4, 0, 0)
        jobs_layout.addLayout(filters)
        jobs_layout.addLayout(fields)
        jobs_layout.addWidget(self.table, 1)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(jobs_page, "Jobs")
        self.tabs.addTab(self.pipelines, "Pipelines")
        self.tabs.currentChanged.connect(lambda _i: self._sync_actions())

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.tabs)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([800, 480])

        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 0, 6, 6)
        layout.addWidget(self.banner)
        layout.addWidget(split, 1)
        self.setCentralWidget(central)

        self._counts_timer = QTimer(self, singleShot=True, interval=1000)
        self._counts_timer.timeout.connect(lambda: spawn(self.refresh_counts(), "status-counts"))
        self._clock = QTimer(self, interval=1000)
        self._clock.timeout.connect(self._tick)
        self._clock.start()
        self._detail_task: asyncio.Task[None] | None = None

        connection.connected.connect(self._on_connected)
        connection.disconnected.connect(self._on_disconnected)
        connection.writable_changed.connect(self._on_writable)
        connection.jobs_changed.connect(self._on_jobs_changed)
        self._set_banner(f"connecting to {connection.describe()}…", "connecting")
        self._update_status_labels(StatusCounts())

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        if not self.workers.may_close():  # asks about the workers this console launched
            event.ignore()
            return
        self.stop_timers()
        super().closeEvent(event)

    async def shutdown(self) -> None:
        """The console exits: stop the workers it launched (unless left running), then disconnect."""
        await self.workers.shutdown()
        await self.connection.close()

    def stop_timers(self) -> None:
        self.workers.stop()
        self._clock.stop()
        self._counts_timer.stop()
        if getattr(self, "_debounce_timer", None) is not None:
            self._debounce_timer.stop()

    # -- connection -------------------------------------------------------------------------

    def _on_connected(self, description: str) -> None:
        kind = "production" if self.production else "connected"
        self._set_banner(f"{'PRODUCTION · ' if self.production else ''}{description}", kind)
        self.setWindowTitle(f"jobdesk — {description}")
        self.job_actions.set_connected(True)
        self.model.active = True
        self.model.reload()
        self.pipelines.set_active(True)
        self._counts_timer.start(0)

    def _on_disconnected(self, reason: str) -> None:
        self._set_banner(f"disconnected, retrying… ({reason})", "disconnected")
        self.job_actions.set_connected(False)
        self.model.active = False
        self.pipelines.set_active(False)

    def _on_writable(self, writable: bool) -> None:
        self.job_actions.set_read_only(not writable)
        self.pipelines.update_enabled()
        self.read_only_action.setVisible(not writable)
        title = self.windowTitle().removesuffix(" (read-only)")
        self.setWindowTitle(title + ("" if writable else " (read-only)"))

    def _set_banner(self, text: str, kind: str) -> None:
        self.banner.setText(text)
        self.banner.setProperty("kind", kind)
        self.banner.style().unpolish(self.banner)
        self.banner.style().polish(self.banner)

    # -- live updates -----------------------------------------------------------------------

    def _on_jobs_changed(self, ids: set[str] | None) -> None:
        self._changed(ids)

    def _changed(self, ids: set[str] | None) -> None:
        if ids is None:
            self.model.reload()
        else:
            spawn(self._apply(ids), "apply-changes")
        self.pipelines.on_jobs_changed(ids)
        if not self._counts_timer.isActive():
            self._counts_timer.start()
        if self.detail.job_id and (ids is None or self.detail.job_id in ids):
            self._load_detail(self.detail.job_id)

    async def _apply(self, ids: set[str]) -> None:
        try:
            await self.model.apply_changes(ids)
        except Exception as exc:
            log.warning("live update failed: %s", exc)
        self._selection_changed()

    async def refresh_counts(self) -> None:
        filt = self.model.filter
        try:
            counts = await self.connection.run(lambda jobs: jobs.status_counts(filt))
        except Exception as exc:
            log.warning("status counts failed: %s", exc)
            return
        self._update_status_labels(counts)

    def _update_status_labels(self, counts: StatusCounts) -> None:
        total = 0
        exact = True
        for status, button in self.status_buttons.items():
            if status is None:
                continue
            n = counts.counts.get(status, 0)
            total += n
            exact &= counts.exact(status)
            shown = f"{n:,}" + ("" if counts.exact(status) else "+")
            button.setText(f"{status_label(status)} {shown}")
            button.setToolTip("" if counts.exact(status) else f"at least {n:,} (counting stops there)")
        self.status_buttons[None].setText(f"All {total:,}{'' if exact else '+'}")

    def _tick(self) -> None:
        self.model.now = datetime.now(UTC)
        self.table.viewport().update()

    # -- filters ----------------------------------------------------------------------------

    def _filter_edit(self, placeholder: str, width: int) -> QLineEdit:
        edit = QLineEdit()
        edit.setPlaceholderText(placeholder)
        edit.setClearButtonEnabled(True)
        edit.setMinimumWidth(width)
        edit.returnPressed.connect(self._apply_filters)
        edit.textChanged.connect(lambda _t: self._debounce.start())
        return edit

    @property
    def _debounce(self) -> QTimer:
        timer = getattr(self, "_debounce_timer", None)
        if timer is None:
            timer = QTimer(self, singleShot=True, interval=400)
            timer.timeout.connect(self._apply_filters)
            self._debounce_timer = timer
        return timer

    def current_filter(self) -> JobFilter:
        statuses = checked(self.status_buttons)
        user_text = self.user_edit.text().strip()
        span = TIME_RANGES[self.time_combo.currentText()]
        return JobFilter(statuses=statuses, type=self.type_edit.text().strip() or None,
                         pipeline_id=self.pipeline_edit.text().strip() or None,
                         user_id=int(user_text) if user_text.isdigit() else None,
                         created_from=datetime.now(UTC) - span if span else None,
                         search=self.search_edit.text().strip() or None)

    def _apply_filters(self) -> None:
        if self.user_edit.text().strip() and not self.user_edit.text().strip().isdigit():
            self._show_message("user must be a number")
            return
        self.model.set_query(self.current_filter())
        self._counts_timer.start(0)

    # -- selection and detail ---------------------------------------------------------------

    def selected_rows(self) -> list[Any]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [r for r in (self.model.row_at(i) for i in rows) if r is not None]

    def _node_clicked(self, job_id: str) -> None:
        self._load_detail(job_id)
        self._sync_actions()

    def _sync_actions(self) -> None:
        """The toolbar's actions act on what the current tab has selected: rows, or a DAG node."""
        if self.tabs.currentWidget() is self.pipelines:
            self.job_actions.set_selection(self.pipelines.selected_nodes())
        else:
            self.job_actions.set_selection(self.selected_rows())

    def _selection_changed(self, *_: QItemSelection) -> None:
        if self.tabs.currentWidget() is self.pipelines:
            return
        rows = self.selected_rows()
        self.job_actions.set_selection(rows)
        if len(rows) == 1 and rows[0].id != self.detail.job_id:
            self._load_detail(rows[0].id)
        elif not rows:
            self.detail.clear()

    def choose_connection(self) -> None:
        dialog = ConnectionDialog(ProfileStore(), self)
        if dialog.exec() == ConnectionDialog.DialogCode.Accepted:
            profile, url = dialog.chosen()
            self.switch_requested.emit(profile, url)

    def show_pipeline(self, pipeline_id: str) -> None:
        """Narrow the table to one pipeline's jobs."""
        self.tabs.setCurrentIndex(0)
        self.pipeline_edit.setText(pipeline_id)
        self._apply_filters()

    def show_pipeline_graph(self, pipeline_id: str) -> None:
        """Open the Pipelines tab on this pipeline's DAG."""
        self.tabs.setCurrentWidget(self.pipelines)
        self.pipelines.show_pipeline(pipeline_id)

    def activate_job(self, job_id: str) -> None:
        """Select a job in the job table, narrowing the table to its pipeline if it is not shown."""
        self.tabs.setCurrentIndex(0)
        if self.model.row_of(job_id) is not None:
            self.select_job(job_id)
            return
        node = self.pipelines.node(job_id)
        self._pending_select = job_id
        if node is not None and self.pipelines.pipeline_id:
            self.show_pipeline(self.pipelines.pipeline_id)
        else:
            self.search_edit.setText(job_id)
            self._apply_filters()

    def _select_pending(self) -> None:
        job_id = self._pending_select
        if job_id is not None and self.model.row_of(job_id) is not None:
            self._pending_select = None
            self.select_job(job_id)

    def select_job(self, job_id: str) -> None:
        row = self.model.row_of(job_id)
        if row is not None:
            self.table.selectRow(row)
            self.table.scrollTo(self.model.index(row, 0))
        else:
            self._load_detail(job_id)

    def _load_detail(self, job_id: str) -> None:
        if self._detail_task is not None:
            self._detail_task.cancel()
        self._detail_task = spawn(self._fetch_detail(job_id), "job-detail")

    async def _fetch_detail(self, job_id: str) -> None:
        try:
            detail = await self.connection.run(lambda jobs: jobs.job_detail(job_id))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._show_message(f"cannot load job {short_id(job_id)}: {exc}")
            return
        self.detail.show_job(detail)

    # -- messages ---------------------------------------------------------------------------

    def _show_message(self, text: str) -> None:
        self.statusBar().showMessage(text, 8000)

    def _show_error(self, text: str) -> None:
        self._show_message(text)
        box = QMessageBox(QMessageBox.Icon.Warning, "jobdesk", text, QMessageBox.StandardButton.Ok, self)
        box.setModal(False)
        box.show()

    def _query_failed(self, text: str) -> None:
        self._show_message(f"query failed: {text}")


