"""The Approvals tab: every job waiting for approval, oldest first, with its result beside it.

Approve (Ctrl+Return) and Reject (Ctrl+Shift+J) are the toolbar's actions; while this tab is
shown they act on its current job, and once that job leaves the list the next one is selected,
so an operator can work through the inbox from the keyboard. The tab's title carries the count."""

from __future__ import annotations

import asyncio
import logging

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QToolButton, QVBoxLayout, QWidget

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, REFUSED, await_or_refuse
from jobdesk.console.jobs.job_actions import JobActions
from jobdesk.console.jobs.job_detail import JsonView
from jobdesk.console.jobs.job_table_model import COL_CREATED, COL_ID, COL_PIPELINE, COL_TYPE, COLUMNS, JobTableModel
from jobdesk.console.jobs.live_rows import LiveRows
from jobdesk.console.list_table import list_table, scaled
from jobdesk.console.shown_gate import ShownGate
from jobdesk.console.tasks import spawn
from jobdesk.core.models import Status, short_id
from jobdesk.store.jobs import JobFilter, JobRow

log = logging.getLogger("jobdesk.console")

SHOWN_COLUMNS = (COL_TYPE, COL_ID, COL_PIPELINE, COL_CREATED)
WAITING = JobFilter(statuses=frozenset({Status.WAITING_APPROVAL}))
COUNT_EVERY_MS = 5000


class ApprovalsTab(QWidget):
    selection_changed = Signal(list)  # the current JobRow in a list, or []
    title_changed = Signal(str)  # "Approvals (3)"
    query_failed = Signal(str)

    def __init__(self, connection: ConsoleConnection, actions: JobActions) -> None:
        super().__init__()
        self.connection = connection
        self.job_actions = actions
        self.count: int | None = None
        self.model = JobTableModel(connection.run)
        self.model.filter, self.model.sort_key, self.model.descending = WAITING, "created", False  # oldest first
        self.model.failed.connect(self.query_failed)
        self.model.loaded.connect(self._keep_a_job_selected)
        self.table = list_table(self.model, [0] * len(COLUMNS))
        for col in range(len(COLUMNS)):
            self.table.setColumnHidden(col, col not in SHOWN_COLUMNS)
        for col, width in ((COL_ID, 76), (COL_TYPE, 120), (COL_PIPELINE, 76)):
            self.table.setColumnWidth(col, scaled(width, self.table))
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)
        self._row = 0  # where the current job was, so the next one takes its place

        self.heading = QLabel("Nothing waits for approval")
        self.heading.setObjectName("detailTitle")
        self.heading.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result_view = JsonView()
        # The toolbar's own actions: while this tab is shown they act on its current job.
        self.approve_button = QToolButton()
        self.approve_button.setDefaultAction(actions.actions["approve"])
        self.reject_button = QToolButton()
        self.reject_button.setDefaultAction(actions.actions["reject"])
        for button in (self.approve_button, self.reject_button):
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        buttons = QHBoxLayout()
        buttons.addWidget(self.approve_button)
        buttons.addWidget(self.reject_button)
        buttons.addStretch(1)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(6, 0, 0, 0)
        right_layout.addWidget(self.heading)
        right_layout.addWidget(QLabel("Result"))
        right_layout.addWidget(self.result_view, 1)
        right_layout.addLayout(buttons)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.table)
        split.addWidget(right)
        split.setSizes([360, 440])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(split)

        # The count on the tab's title is read at most this often while jobs change.
        self._count_timer = QTimer(self, singleShot=True, interval=COUNT_EVERY_MS)
        self._count_timer.timeout.connect(lambda: spawn(self.refresh_count(), "approvals-count"))
        self._result_task: asyncio.Task[None] | None = None
        # While hidden, changes only mark the list stale (the count on the tab's title stays
        # live): a busy queue costs no inbox queries until somebody looks.
        self.gate = ShownGate(self, self.model.reload, active=lambda: self.model.active)
        self.live = LiveRows(self.table, self.model, self.gate)  # reads bounded by the rows on screen

    def stop_timers(self) -> None:
        self._count_timer.stop()

    # -- live -------------------------------------------------------------------------------

    def set_active(self, active: bool) -> None:
        self.model.active = active
        if active:
            self._count_timer.start(0)
            self.gate.refresh()

    def on_jobs_changed(self, ids: set[str] | None) -> None:
        self.live.changed(ids)  # on screen only; else the list is read again when shown
        if not self._count_timer.isActive():
            self._count_timer.start(COUNT_EVERY_MS)  # start(0) on connecting left its interval at 0

    async def refresh_count(self) -> None:
        try:
            counts = await self.connection.run(
                lambda jobs: jobs.status_counts(WAITING, only=[Status.WAITING_APPROVAL]))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("approvals count failed: %s", exc)
            return
        self.count = counts.counts.get(Status.WAITING_APPROVAL, 0)
        shown = f"{self.count:,}" + ("" if counts.exact(Status.WAITING_APPROVAL) else "+")
        self.title_changed.emit(f"Approvals ({shown})" if self.count else "Approvals")

    # -- selection --------------------------------------------------------------------------

    def selected_rows(self) -> list[JobRow]:
        rows = [self.model.row_at(i.row()) for i in self.table.selectionModel().selectedRows()]
        return [r for r in rows if r is not None]

    def _keep_a_job_selected(self) -> None:
        """After the current job was approved or rejected (or on the first load), select the job
        that took its place."""
        selected = self.selected_rows()
        if selected:  # rows above it may have gone: remember where it is now
            self._row = self.model.row_of(selected[0].id) or 0
            return
        if self.model.rowCount() == 0:
            self._show(None)
            return
        self.table.selectRow(min(self._row, self.model.rowCount() - 1))

    def _selection_changed(self, *_: object) -> None:
        rows = self.selected_rows()
        if rows:
            self._row = self.model.row_of(rows[0].id) or 0
        self._show(rows[0] if rows else None)
        self.selection_changed.emit(rows)

    def _show(self, row: JobRow | None) -> None:
        if self._result_task is not None:
            self._result_task.cancel()
            self._result_task = None
        if row is None:
            self.heading.setText("Nothing waits for approval" if self.model.rowCount() == 0 else "Select a job")
            self.result_view.show_value(None)
            return
        self.heading.setText(f"<b>{row.type}</b> &nbsp; <code>{short_id(row.id)}</code>"
                             + (f" &nbsp; pipeline <code>{short_id(row.pipeline_id)}</code>"
                                if row.pipeline_id else ""))
        self._result_task = spawn(self._load_result(row.id), "approval-result")

    async def _load_result(self, job_id: str) -> None:
        detail = await await_or_refuse(self.connection.run(lambda jobs: jobs.job_detail(job_id)), lambda exc:
                                       self.heading.setText(f"cannot load job {short_id(job_id)}: {exc}"))
        if detail is not REFUSED:
            self.result_view.show_value(detail.job.result_data)
