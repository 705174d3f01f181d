"""The console window: banner, toolbar, the Jobs, Pipelines, Schedules, Approvals and Failures tabs,
the detail pane and the worker docks. It lays them out (the banner, toolbar and splitter are in `window_chrome`) and
connects their signals, all in `_connect`; each tab owns its own model, filters and state."""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QMainWindow, QMessageBox, QTableView, QTabWidget

from jobdesk.console.about import AboutDialog
from jobdesk.console.approvals.approvals_tab import ApprovalsTab
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.connection_dialog import ConnectionDialog, ProfileStore
from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.failures.failures_tab import FailuresTab
from jobdesk.console.font_size import FontSize
from jobdesk.console.jobs.bulk_action import BulkActions
from jobdesk.console.jobs.input_models import input_models
from jobdesk.console.jobs.job_actions import JobActions
from jobdesk.console.jobs.job_pane import JobPane
from jobdesk.console.jobs.job_sharing import JobSharing
from jobdesk.console.jobs.jobs_tab import JobsTab
from jobdesk.console.jobs.new_job_dialog import NewJobDialog
from jobdesk.console.metrics.metrics_tab import MetricsTab, TableSizeLabel
from jobdesk.console.notify.notifier import Notice, NotificationSettings, Notifier
from jobdesk.console.notify.tray import AttentionPresenter
from jobdesk.console.pipelines.pipelines_tab import PipelinesTab
from jobdesk.console.replica_lag import ReplicaLagLabel
from jobdesk.console.schedules.schedules_tab import SchedulesTab
from jobdesk.console.shortcuts import ShortcutsDialog, add_shortcut, move_in
from jobdesk.console.status_line import StatusBar
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import icon
from jobdesk.console.window_chrome import Banner, MainToolbar, central_widget
from jobdesk.console.workers.workers_controller import WorkersController
from jobdesk.core.models import short_id
from jobdesk.store.jobs import JobFilter, JobRow

log = logging.getLogger("jobdesk.console")


class MainWindow(QMainWindow):
    switch_requested = Signal(object, object)  # (Profile or None for embedded, URL with password)

    def __init__(self, connection: ConsoleConnection, *, production: bool = False,
                 notification_settings: NotificationSettings | None = None) -> None:
        super().__init__()
        self.connection = connection
        self.production = production
        self.font_size = FontSize(self)  # first: the tables below take their widths from the font
        self.resize(1280, 800)
        self.status_bar = StatusBar()  # passing messages beside the permanent labels; the read-only sign
        self.setStatusBar(self.status_bar)
        self.setWindowIcon(icon("jobdesk"))

        self.jobs = JobsTab(connection)
        self.model = self.jobs.model  # the job table's model, which the toolbar's Refresh reloads
        self.pane = JobPane(connection, self)  # the job detail beside the tabs where a job is selected
        self.detail = self.pane.detail
        self.job_actions = JobActions(self, connection.act)
        self.pipelines = PipelinesTab(connection, self.job_actions)
        self.schedules = SchedulesTab(connection)
        self.approvals = ApprovalsTab(connection, self.job_actions)
        self._input_models: dict[str, type] | None = None  # loaded with the first New job dialog
        self.new_job_dialog: NewJobDialog | None = None
        self.shortcuts_dialog: ShortcutsDialog | None = None
        self.about_dialog: AboutDialog | None = None
        self.workers = WorkersController(self, connection)  # Workers dock, worker log, Launch worker
        self.bulk = BulkActions(self, connection, self.jobs.current_filter)  # "Retry all N matching…"
        self.failures = FailuresTab(connection)
        self.metrics = MetricsTab(connection)
        self.table_size = TableSizeLabel(connection)
        self.statusBar().addPermanentWidget(self.table_size)
        self.replica_lag = ReplicaLagLabel(connection)  # "replica 3.2 s behind", with DATABASE_READ_URL
        self.statusBar().addPermanentWidget(self.replica_lag)
        self.notification_settings = notification_settings or NotificationSettings(
            env_enabled=connection.settings.JOBDESK_NOTIFICATIONS)
        self.notifier = Notifier(connection, self.notification_settings)
        self.attention = AttentionPresenter(self, self.statusBar(), self.notification_settings)

        self.banner = Banner()
        self.toolbar = MainToolbar(self, self.job_actions.actions.values(), self.bulk.actions.values(),
                                   (self.workers.launch_action, self.workers.dock_action))
        self.addToolBar(self.toolbar)
        self.new_job_action = self.toolbar.new_job_action
        self.tabs = self._build_tabs()
        self.pane.show_beside((self.jobs, self.pipelines, self.failures))
        self.pane.follow_tab(self.tabs.currentWidget())
        self.setCentralWidget(central_widget(self.banner, self.tabs, self.pane.area))
        self.share = JobSharing(self)  # copies, the table's context menu, Edit input, Export…, open on a job

        self._add_shortcuts()
        self._connect()
        self.banner.show_state(f"connecting to {connection.describe()}…", "connecting")

    def _build_tabs(self) -> QTabWidget:
        tabs = QTabWidget()
        tabs.setDocumentMode(True)
        tabs.addTab(self.jobs, "Jobs")
        tabs.addTab(self.pipelines, "Pipelines")
        tabs.addTab(self.schedules, "Schedules")
        tabs.addTab(self.approvals, "Approvals")
        tabs.addTab(self.failures, "Failures")
        tabs.addTab(self.metrics, "Metrics")
        return tabs

    def _connect(self) -> None:
        """Every signal between the window's parts, in one place."""
        connection = self.connection
        connection.connected.connect(self._on_connected)
        connection.disconnected.connect(self._on_disconnected)
        connection.writable_changed.connect(self._on_writable)
        connection.jobs_changed.connect(self._changed)

        self.jobs.selection_changed.connect(self._rows_selected)
        self.jobs.message.connect(self._show_message)
        self.jobs.query_failed.connect(lambda text: self._show_message(f"query failed: {text}"))
        self.detail.job_link_clicked.connect(self.select_job)
        self.detail.pipeline_link_clicked.connect(self.show_pipeline)
        self.detail.pipeline_graph_clicked.connect(self.show_pipeline_graph)
        self.job_actions.message.connect(self._show_message)
        self.job_actions.error.connect(self._show_error)
        self.job_actions.done.connect(lambda ids: self._changed(set(ids)))
        self.pipelines.job_clicked.connect(self._node_clicked)
        self.pipelines.graph_shown.connect(self._sync_actions)
        self.pipelines.pipeline_jobs_requested.connect(self.show_pipeline)
        self.pipelines.job_activated.connect(self.activate_job)
        self.pipelines.message.connect(self._show_message)
        self.schedules.job_activated.connect(self.activate_job)
        self.schedules.message.connect(self._show_message)
        self.workers.job_link_clicked.connect(self.select_job)
        self.workers.message.connect(self._show_message)
        self.tabs.currentChanged.connect(lambda _i: self._tab_changed())
        self.pane.message.connect(self._show_message)
        self.pane.shown_job.connect(self._sync_actions)
        self.jobs.counts_changed.connect(self.bulk.set_counts)
        self.jobs.counts_changed.connect(lambda counts: self.table_size.set_listed(self.jobs.every_job_count(counts)))
        self.bulk.message.connect(self._show_message)
        self.bulk.error.connect(self._show_error)
        self.failures.jobs_requested.connect(self.show_jobs_matching)
        self.failures.retry_requested.connect(lambda filt: self.bulk.ask("retry", filt))
        self.failures.job_clicked.connect(self._load_detail)
        self.failures.message.connect(self._show_message)
        self.toolbar.refresh_action.triggered.connect(self.jobs.model.reload)
        self.toolbar.connect_action.triggered.connect(self.choose_connection)
        self.new_job_action.triggered.connect(self.new_job)
        self.approvals.selection_changed.connect(self._inbox_selected)
        self.approvals.title_changed.connect(
            lambda text: self.tabs.setTabText(self.tabs.indexOf(self.approvals), text))
        self.approvals.query_failed.connect(lambda text: self._show_message(f"query failed: {text}"))
        self.metrics.message.connect(self._show_message)
        connection.jobs_changed.connect(self.notifier.on_jobs_changed)
        self.notifier.notice.connect(self.attention.show_notice)
        self.notifier.notice.connect(lambda _n: self.attention.known_types.update(self.notifier.known_types))
        self.notifier.counts.connect(self.attention.show_counts)
        self.attention.open_requested.connect(self.open_notice)
        self.attention.show_window_requested.connect(self._raise)

    def _add_shortcuts(self) -> None:
        """Keys without modifiers (not while typing in a text field), and the list of them all."""
        add_shortcut(self, "/", "Search the jobs", self.focus_search)
        add_shortcut(self, "J", "Next row of the table", lambda: self.move_in_table(1))
        add_shortcut(self, "K", "Previous row of the table", lambda: self.move_in_table(-1))
        add_shortcut(self, "?", "List every shortcut", self.show_shortcuts)
        add_shortcut(self, "F1", "About jobdesk: its version, and the database", self.show_about)

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
        for part in (self.jobs, self.schedules, self.approvals, self.failures, self.metrics, self.table_size,
                     self.replica_lag, self.notifier):
            part.stop_timers()

    # -- connection -------------------------------------------------------------------------

    def _on_connected(self, description: str) -> None:
        kind = "production" if self.production else "connected"
        self.banner.show_state(f"{'PRODUCTION · ' if self.production else ''}{description}", kind)
        self.setWindowTitle(f"jobdesk — {description}")
        self.job_actions.set_connected(True)
        for part in self._live_parts():
            part.set_active(True)
        self._update_new_job()
        self.bulk.set_state(connected=True)
        self.notifier.on_connected()

    def _on_disconnected(self, reason: str) -> None:
        self.banner.show_state(f"disconnected, retrying… ({reason})", "disconnected")
        self.job_actions.set_connected(False)
        for part in self._live_parts():
            part.set_active(False)
        self._update_new_job()
        self.bulk.set_state(connected=False)

    def _live_parts(self) -> list[JobsTab | PipelinesTab | SchedulesTab | ApprovalsTab | FailuresTab | MetricsTab
                                  | TableSizeLabel | ReplicaLagLabel]:
        """What reads the database while connected, and stops on a disconnection."""
        return [self.jobs, self.pipelines, self.schedules, self.approvals, self.failures, self.metrics,
                self.table_size, self.replica_lag]

    def _on_writable(self, writable: bool) -> None:
        """Read-only or not: every action stays in sight, and while the console cannot act each
        is disabled with a tooltip that says why; so does the status bar's "read-only" sign."""
        reason = self.connection.read_only_reason
        self.job_actions.set_read_only(reason)
        self.pipelines.update_enabled()
        self.schedules.set_active(self.connection.is_connected)
        self.bulk.set_read_only(reason)
        self.toolbar.set_read_only(reason)
        self.failures.set_read_only(reason)
        self.status_bar.show_read_only(reason)
        self._update_new_job()
        title = self.windowTitle().removesuffix(" (read-only)")
        self.setWindowTitle(title + ("" if writable else " (read-only)"))

    # -- live updates -----------------------------------------------------------------------

    def _changed(self, ids: set[str] | None) -> None:
        self.jobs.on_jobs_changed(ids)
        self.pipelines.on_jobs_changed(ids)
        self.approvals.on_jobs_changed(ids)
        self.failures.on_jobs_changed(ids)
        # The pane's job is the one being loaded, if any (the user has moved on from the one shown):
        # reloading the shown one would cancel that load and leave the pane on the old job.
        target = self.pane.target
        if target and self.pane.shown and (ids is None or target in ids):
            self._load_detail(target)

    async def refresh_counts(self) -> None:
        await self.jobs.refresh_counts()

    # -- selection and detail ---------------------------------------------------------------

    def selected_rows(self) -> list[JobRow]:
        return self.jobs.selected_rows()

    def _node_clicked(self, job_id: str) -> None:
        self._load_detail(job_id)
        self._sync_actions()

    def _tab_changed(self) -> None:
        """The pane (with the job this tab showed last) and the actions follow the tab."""
        self.pane.follow_tab(self.tabs.currentWidget())
        self._sync_actions()

    def _sync_actions(self) -> None:
        """The toolbar's actions act on what the current tab has selected: rows, or a DAG node;
        on a tab that selects no job (Schedules, Metrics) they act on nothing."""
        current = self.tabs.currentWidget()
        if current is self.pipelines:
            self.job_actions.set_selection(self.pipelines.selected_nodes())
        elif current is self.approvals:
            self._inbox_selected(self.approvals.selected_rows())
        elif current is self.jobs:
            self.job_actions.set_selection(self.jobs.selected_rows())
        elif current is self.failures:  # the group's newest failure, which the pane shows
            record = self.detail.record
            self.job_actions.set_selection([record] if record is not None else [])
        else:
            self.job_actions.set_selection([])

    def _rows_selected(self, rows: list[JobRow]) -> None:
        if self.tabs.currentWidget() is not self.jobs:
            return
        self.job_actions.set_selection(rows)
        if len(rows) == 1 and rows[0].id != self.detail.job_id:
            self._load_detail(rows[0].id)
        elif not rows:
            self.pane.clear()

    def _inbox_selected(self, rows: list[JobRow]) -> None:
        """The inbox's current job: the toolbar's actions follow it (the inbox shows the job itself,
        so the job pane is hidden there)."""
        if self.tabs.currentWidget() is self.approvals:
            self.job_actions.set_selection(rows)

    # -- keyboard and New job ---------------------------------------------------------------

    def focus_search(self) -> None:
        self.tabs.setCurrentWidget(self.jobs)
        self.jobs.search_edit.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.jobs.search_edit.selectAll()

    def move_in_table(self, step: int) -> None:
        """j / k: the next or previous row of the current tab's table."""
        table = getattr(self.tabs.currentWidget(), "table", None)
        if isinstance(table, QTableView):
            move_in(table, step)

    def show_shortcuts(self) -> None:
        self.shortcuts_dialog = ShortcutsDialog(self)
        self.shortcuts_dialog.show()

    def show_about(self) -> None:
        self.about_dialog = AboutDialog(self, self.connection.describe())
        self.about_dialog.show()

    def _update_new_job(self) -> None:
        self.toolbar.update_new_job(self.connection.is_connected, self.connection.read_only_reason)

    def new_job(self) -> None:
        if not self.new_job_action.isEnabled():
            return
        if self._input_models is None:
            try:
                self._input_models = input_models(self.connection.settings)
            except EXPECTED as exc:  # a processor module that cannot load: submit without checks
                self._show_message(f"input checks unavailable: {reason(exc)}")
                self._input_models = {}
        dialog = NewJobDialog(self.connection, self._input_models, self)
        dialog.submitted.connect(self._job_submitted)
        spawn(dialog.load_types(self.connection.settings.JOB_LEASE_TIMEOUT), "new-job-types")
        self.new_job_dialog = dialog
        dialog.open()

    def _job_submitted(self, job_id: str) -> None:
        self._show_message(f"submitted job {short_id(job_id)}")
        self._load_detail(job_id)

    def choose_connection(self) -> None:
        dialog = ConnectionDialog(ProfileStore(), self)
        if dialog.exec() == ConnectionDialog.DialogCode.Accepted:
            profile, url = dialog.chosen()
            self.switch_requested.emit(profile, url)

    def show_pipeline(self, pipeline_id: str) -> None:
        """Narrow the job table to one pipeline's jobs."""
        self.tabs.setCurrentWidget(self.jobs)
        self.jobs.show_pipeline(pipeline_id)

    def show_jobs_matching(self, filt: JobFilter) -> None:
        """Show a Failures group's jobs in the job table."""
        self.tabs.setCurrentWidget(self.jobs)
        self.jobs.show_fingerprint(filt.fingerprint)

    def show_pipeline_graph(self, pipeline_id: str) -> None:
        """Open the Pipelines tab on this pipeline's DAG."""
        self.tabs.setCurrentWidget(self.pipelines)
        self.pipelines.show_pipeline(pipeline_id)

    def activate_job(self, job_id: str) -> None:
        """Select a job in the job table, narrowing the table to its pipeline if it is not shown."""
        self.tabs.setCurrentWidget(self.jobs)
        if self.jobs.select_job(job_id):
            return
        in_graph = self.pipelines.node(job_id) is not None
        self.jobs.select_when_shown(job_id, pipeline_id=self.pipelines.pipeline_id if in_graph else None)

    def open_notice(self, notice: Notice) -> None:
        """A notification was clicked: open its job, or the job table filtered to its jobs."""
        self._raise()
        self.tabs.setCurrentWidget(self.jobs)
        self.jobs.show_notice(notice.job_id, notice.statuses, notice.type)
        if notice.job_id is not None:  # the table searches for it and selects it; the detail shows it now
            self._load_detail(notice.job_id)

    def _raise(self) -> None:
        if self.isMinimized() or not self.isVisible():
            self.showNormal()
            self.raise_()
        self.activateWindow()

    def select_job(self, job_id: str) -> None:
        """Select the job in the table if it is shown, and show it in the detail pane. A row
        that was already selected (a refresh may have moved the job onto it) emits no change of
        selection, so the pane is loaded here unless it shows, or is loading, this job."""
        if not self.jobs.select_job(job_id) or job_id not in (self.detail.job_id, self.pane.loading):
            self._load_detail(job_id)

    def _load_detail(self, job_id: str) -> None:
        """Show the job in the pane; from a tab without one (a link in the Workers dock, a new
        job), on the Jobs tab."""
        if not self.pane.shown:
            self.tabs.setCurrentWidget(self.jobs)
        self.pane.load(job_id)

    @property
    def _detail_loading(self) -> str | None:
        return self.pane.loading

    # -- messages ---------------------------------------------------------------------------

    def _show_message(self, text: str) -> None:
        self.statusBar().showMessage(text, 8000)

    def _show_error(self, text: str) -> None:
        self._show_message(text)
        box = QMessageBox(QMessageBox.Icon.Warning, "jobdesk", text, QMessageBox.StandardButton.Ok, self)
        box.setModal(False)
        box.show()
