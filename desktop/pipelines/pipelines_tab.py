"""The Pipelines tab: the live pipeline list above, the selected pipeline's DAG below."""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QItemSelection, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QSplitter,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from jobdesk.console.access import gate, gate_menu
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED
from jobdesk.console.jobs.job_actions import ACTIONS, RULES, JobActions, action_is_legal
from jobdesk.console.list_table import list_table
from jobdesk.console.pipelines.dag_view import DagView
from jobdesk.console.pipelines.pipeline_model import COL_PROGRESS, COL_STATUS, PipelineListModel, pipeline_label
from jobdesk.console.pipelines.progress_delegate import PIPELINE_COLOURS, PipelineDelegate
from jobdesk.console.shown_gate import ShownGate
from jobdesk.console.status_filter import checked, status_buttons
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import icon
from jobdesk.core.models import Status, short_id
from jobdesk.core.rules import is_legal
from jobdesk.store.pipelines import (
    GRAPH_LIMIT,
    GraphNode,
    PipelineFilter,
    PipelineStatus,
)

log = logging.getLogger("jobdesk.console")
PLAN_SHOWN = 15  # jobs listed by name in the "retry failed and downstream" question
CANCEL_PIPELINE_TIP = "Cancel every unfinished job of the pipeline shown"


class PipelinesTab(QWidget):
    job_clicked = Signal(str)  # show this job in the detail panes
    job_activated = Signal(str)  # select this job in the job table
    graph_shown = Signal()  # the DAG was drawn or updated
    pipeline_jobs_requested = Signal(str)  # show this pipeline's jobs in the job table
    message = Signal(str)

    def __init__(self, connection: ConsoleConnection, job_actions: JobActions) -> None:
        super().__init__()
        self.connection = connection
        self.job_actions = job_actions
        self.extend_node_menu: Callable[[QMenu, str], None] | None = None  # more entries for a node's menu
        self._build_table(connection)
        filters = self._build_filters()
        dag_box = self._build_dag()

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(dag_box)
        split.setSizes([260, 440])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(filters)
        layout.addWidget(split, 1)

        self.pipeline_id: str | None = None
        self.graph: list[GraphNode] = []
        self._graph_loading = False
        self._graph_again = False
        self._clock = QTimer(self, interval=1000)  # ages the "3 s ago" cells
        self._clock.timeout.connect(self.model.tick)
        # While hidden, changes only mark the tab stale and its clock stops: a busy queue then
        # costs the console no pipeline queries until somebody looks.
        self.gate = ShownGate(self, self._read, active=lambda: self.model.active,
                              clocks=[self._clock, self.dag.clock])
        self.update_enabled()

    def _build_table(self, connection: ConsoleConnection) -> None:
        """The live pipeline list, with progress bars and a context menu."""
        self.model = PipelineListModel(connection.run)
        self.model.failed.connect(lambda text: self.message.emit(f"query failed: {text}"))
        self.model.loaded.connect(self._keep_selection)
        self.table = list_table(self.model, (240, 150, 170, 80, 80, 80))
        delegate = PipelineDelegate(self.table)
        self.table.setItemDelegateForColumn(COL_STATUS, delegate)
        self.table.setItemDelegateForColumn(COL_PROGRESS, delegate)
        self.table.selectionModel().selectionChanged.connect(self._pipeline_selected)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._row_menu)

    def _build_filters(self) -> QHBoxLayout:
        """The status buttons and the search field above the list."""
        filters = QHBoxLayout()
        self.status_buttons = status_buttons({s: PIPELINE_COLOURS[s][0] for s in PipelineStatus}, filters,
                                             self.apply_filter, pipeline_label)
        filters.addStretch(1)
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("search pipeline name or id")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.setMinimumWidth(220)
        self.search_edit.returnPressed.connect(self.apply_filter)
        self._debounce = QTimer(self, singleShot=True, interval=400)
        self._debounce.timeout.connect(self.apply_filter)
        self.search_edit.textChanged.connect(lambda _t: self._debounce.start())
        filters.addWidget(self.search_edit)
        return filters

    def _build_dag(self) -> QWidget:
        """The selected pipeline's graph under its toolbar: title, Fit, Centre, Follow, Cancel pipeline."""
        self.dag = DagView()
        self.dag.node_clicked.connect(self.job_clicked)
        self.dag.node_activated.connect(self.job_activated)
        self.dag.context_requested.connect(self._node_menu)
        self.dag_title = QLabel("Select a pipeline to see its jobs")
        self.dag_title.setObjectName("dagTitle")
        dag_bar = QToolBar("Pipeline graph")
        dag_bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        dag_bar.addWidget(self.dag_title)
        spacer = QWidget()
        spacer.setSizePolicy(spacer.sizePolicy().horizontalPolicy().Expanding, spacer.sizePolicy().verticalPolicy())
        dag_bar.addWidget(spacer)
        fit = QAction("Fit", self)
        fit.setToolTip("Show the whole pipeline (F)")
        fit.triggered.connect(self.dag.fit)
        dag_bar.addAction(fit)
        centre = QAction("Centre", self)
        centre.setToolTip("Centre on the running, failed or waiting job (C)")
        centre.triggered.connect(self.dag.centre_on_focus)
        dag_bar.addAction(centre)
        self.follow_action = QAction("Follow", self)
        self.follow_action.setCheckable(True)
        self.follow_action.setShortcut(QKeySequence("Ctrl+Shift+F"))
        self.follow_action.setToolTip("Keep the running or failed job in view as the pipeline moves (Ctrl+Shift+F)")
        self.follow_action.toggled.connect(self.dag.set_follow)
        dag_bar.addAction(self.follow_action)
        self.cancel_pipeline_action = QAction(icon("cancel"), "Cancel pipeline", self)
        self.cancel_pipeline_action.triggered.connect(self._ask_cancel_pipeline)
        dag_bar.addAction(self.cancel_pipeline_action)

        dag_box = QWidget()
        dag_layout = QVBoxLayout(dag_box)
        dag_layout.setContentsMargins(0, 0, 0, 0)
        dag_layout.setSpacing(0)
        dag_layout.addWidget(dag_bar)
        dag_layout.addWidget(self.dag, 1)
        return dag_box

    # -- connection and live updates ----------------------------------------------------------

    def set_active(self, active: bool) -> None:
        self.model.active = active
        if active:
            self.gate.refresh()
        else:
            self.gate.stale = True
        self.update_enabled()

    def refresh(self) -> None:
        """Read the list and the graph again (once shown, if the tab is hidden)."""
        self.gate.refresh()

    def _read(self) -> None:
        self.model.reload()
        self.reload_graph()

    def on_jobs_changed(self, ids: set[str] | None) -> None:
        if not self.gate.shown():
            return  # read again when shown
        if ids is None:
            self._read()
        else:
            spawn(self._apply(ids), "pipelines-apply")

    async def _apply(self, ids: set[str]) -> None:
        try:
            touched = await self.model.apply_changes(ids)
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("pipeline update failed: %s", exc)
            return
        if self.pipeline_id is not None and (self.pipeline_id in touched or ids & {n.id for n in self.graph}):
            self.reload_graph()

    # -- filters and selection ----------------------------------------------------------------

    def current_filter(self) -> PipelineFilter:
        statuses = checked(self.status_buttons)
        return PipelineFilter(statuses=statuses, search=self.search_edit.text().strip() or None)

    def apply_filter(self) -> None:
        self.model.set_filter(self.current_filter())

    def show_pipeline(self, pipeline_id: str) -> None:
        """Select this pipeline in the list if it is loaded, and show its graph either way."""
        row = self.model.row_of(pipeline_id)
        if row is not None:
            self.table.selectRow(row)
        else:
            self._set_pipeline(pipeline_id)

    def _pipeline_selected(self, *_: QItemSelection) -> None:
        rows = self.table.selectionModel().selectedRows()
        record = self.model.row_at(rows[0].row()) if rows else None
        if record is not None and record.pipeline_id != self.pipeline_id:
            self._set_pipeline(record.pipeline_id)

    def _keep_selection(self) -> None:
        """After a reload, keep the shown pipeline selected in the list."""
        if self.pipeline_id is None:
            return
        row = self.model.row_of(self.pipeline_id)
        selected = self.table.selectionModel().selectedRows()
        if row is not None and (not selected or selected[0].row() != row):
            self.table.selectionModel().blockSignals(True)
            self.table.selectRow(row)
            self.table.selectionModel().blockSignals(False)
            self.table.viewport().update()

    def _set_pipeline(self, pipeline_id: str) -> None:
        self.pipeline_id = pipeline_id
        self.graph = []
        self.dag.clear_graph()
        self.dag_title.setText(f"Pipeline {short_id(pipeline_id)} · loading…")
        self.update_enabled()
        self.reload_graph()

    # -- the graph ----------------------------------------------------------------------------

    def reload_graph(self) -> None:
        if self.pipeline_id is None or not self.model.active:
            return
        if self._graph_loading:
            self._graph_again = True  # one more read when the current one ends
            return
        self._graph_loading = True
        spawn(self._load_graph(), "pipeline-graph")

    async def _load_graph(self) -> None:
        try:
            while True:
                self._graph_again = False
                pipeline_id = self.pipeline_id
                if pipeline_id is None:
                    return
                try:
                    nodes, truncated = await self.connection.run(lambda jobs: jobs.pipeline_graph(pipeline_id))
                except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
                    self.message.emit(f"cannot load pipeline {short_id(pipeline_id)}: {exc}")
                    return
                if pipeline_id == self.pipeline_id:
                    self._show_graph(pipeline_id, nodes, truncated)
                if not self._graph_again:
                    return
        finally:
            self._graph_loading = False

    def _show_graph(self, pipeline_id: str, nodes: list[GraphNode], truncated: bool) -> None:
        self.graph = nodes
        self.dag.set_graph(pipeline_id, nodes)
        self.graph_shown.emit()
        row = self.model.row_of(pipeline_id)
        record = self.model.row_at(row) if row is not None else None
        name = record.name if record is not None else (nodes[0].type if nodes else "")
        done = sum(1 for n in nodes if n.status == Status.COMPLETED)
        more = f" · showing the first {GRAPH_LIMIT:,} jobs" if truncated else ""
        self.dag_title.setText(f"{name} · {short_id(pipeline_id)} · {done} of {len(nodes)} completed{more}")
        self.update_enabled()

    def selected_nodes(self) -> list[GraphNode]:
        job_id = self.dag.selected_job()
        node = self.node(job_id) if job_id else None
        return [node] if node is not None else []

    def node(self, job_id: str) -> GraphNode | None:
        return next((n for n in self.graph if n.id == job_id), None)

    # -- actions ------------------------------------------------------------------------------

    def update_enabled(self) -> None:
        unfinished = any(n.status in (Status.QUEUED, Status.IN_PROGRESS, Status.WAITING_APPROVAL)
                         for n in self.graph)
        gate(self.cancel_pipeline_action, self.job_actions.can_act() and unfinished,
             self.job_actions.read_only_reason, CANCEL_PIPELINE_TIP)

    def node_menu(self, job_id: str) -> QMenu:
        """The context menu of a node: the job's own actions, then pipeline-wide ones."""
        menu = QMenu(self)
        node = self.node(job_id)
        if node is None:
            return menu
        writable = self.job_actions.can_act()
        acts: list[QAction] = []
        allowed: list[bool] = []
        for name, (label, _shortcut, _question) in ACTIONS.items():
            acts.append(menu.addAction(icon(RULES.get(name, name)), label))
            allowed.append(writable and action_is_legal(name, node.status))
            acts[-1].triggered.connect(lambda _c=False, n=name: self.job_actions.trigger(n, [node]))
        menu.addSeparator()
        retry = menu.addAction(icon("retry"), "Retry failed and downstream…")
        retry.triggered.connect(lambda: spawn(self.retry_downstream(job_id), "retry-downstream"))
        cancel = menu.addAction(icon("cancel"), "Cancel pipeline…")
        cancel.triggered.connect(self._ask_cancel_pipeline)
        gate_menu(menu, [*acts, retry, cancel],
                  [*allowed, writable and is_legal("retry", node.status), self.cancel_pipeline_action.isEnabled()],
                  self.job_actions.read_only_reason)
        menu.addSeparator()
        menu.addAction("Show in job table").triggered.connect(lambda: self.job_activated.emit(job_id))
        if self.extend_node_menu is not None:  # Copy ID, input, result, error (`JobSharing`)
            menu.addSeparator()
            self.extend_node_menu(menu, job_id)
        return menu

    def pipeline_menu(self, pipeline_id: str) -> QMenu:
        """The context menu of a row of the pipeline list."""
        menu = QMenu(self)
        row = self.model.row_of(pipeline_id)
        record = self.model.row_at(row) if row is not None else None
        writable = self.job_actions.can_act()
        retry = menu.addAction(icon("retry"), "Retry failed and downstream…")
        retry.triggered.connect(lambda: spawn(self.retry_pipeline(pipeline_id), "retry-pipeline"))
        cancel = menu.addAction(icon("cancel"), "Cancel pipeline…")
        cancel.triggered.connect(self._ask_cancel_pipeline)
        gate_menu(menu, [retry, cancel], [writable and record is not None and record.failed + record.cancelled > 0,
                                          writable and record is not None and not record.finished],
                  self.job_actions.read_only_reason)
        menu.addSeparator()
        menu.addAction("Show its jobs in the job table").triggered.connect(
            lambda: self.pipeline_jobs_requested.emit(pipeline_id))
        return menu

    def _row_menu(self, where: QPoint) -> None:
        index = self.table.indexAt(where)
        record = self.model.row_at(index.row()) if index.isValid() else None
        if record is None:
            return
        self.table.selectRow(index.row())
        self.pipeline_menu(record.pipeline_id).popup(self.table.viewport().mapToGlobal(where))

    def _node_menu(self, job_id: str, where: QPoint) -> None:
        self.node_menu(job_id).popup(where)

    def ask(self, title: str, text: str, details: str = "") -> bool:
        """A yes/no question (tests replace this)."""
        box = QMessageBox(QMessageBox.Icon.Question, title, text,
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self)
        if details:
            box.setInformativeText(details)
        return box.exec() == QMessageBox.StandardButton.Yes

    async def retry_pipeline(self, pipeline_id: str) -> list[str]:
        """"Retry failed and downstream" for every failed or cancelled job of a pipeline."""
        try:
            ids = await self.connection.run(lambda jobs: jobs.retryable_in(pipeline_id))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.job_actions.error.emit(f"cannot plan the retry: {exc}")
            return []
        if not ids:
            self.message.emit(f"pipeline {short_id(pipeline_id)} has no failed or cancelled job to retry")
            return []
        return await self.retry_downstream(*ids)

    async def retry_downstream(self, *job_ids: str) -> list[str]:
        """Show what "retry failed and downstream" of jobs will touch, then do it if confirmed."""
        ids = list(job_ids)
        try:
            plan = await self.connection.run(lambda c: c.retry_plan(ids))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.job_actions.error.emit(f"cannot plan the retry: {exc}")
            return []
        lines = [f"{p['type']} · {short_id(p['id'])} · {p['status']}" for p in plan[:PLAN_SHOWN]]
        if len(plan) > PLAN_SHOWN:
            lines.append(f"… and {len(plan) - PLAN_SHOWN} more")
        if not self.ask("Retry failed and downstream", f"Retry these {len(plan)} job(s)?", "\n".join(lines)):
            return []
        return await self.job_actions.run_operation("Retry failed and downstream",
                                                    lambda c: c.retry_downstream(ids))

    def _ask_cancel_pipeline(self) -> None:
        pipeline_id = self.pipeline_id
        if pipeline_id is None:
            return
        row = self.model.row_of(pipeline_id)
        record = self.model.row_at(row) if row is not None else None
        left = (record.queued + record.in_progress + record.waiting if record is not None else
                sum(1 for n in self.graph if n.status in (Status.QUEUED, Status.IN_PROGRESS, Status.WAITING_APPROVAL)))
        if self.ask("Cancel pipeline", f"Cancel pipeline {short_id(pipeline_id)}?",
                    f"Its {left} unfinished job(s) are cancelled; running ones are stopped by their worker."):
            spawn(self.cancel_pipeline(pipeline_id), "cancel-pipeline")

    async def cancel_pipeline(self, pipeline_id: str) -> list[str]:
        return await self.job_actions.run_operation("Cancel pipeline", lambda c: c.cancel_pipeline(pipeline_id))

