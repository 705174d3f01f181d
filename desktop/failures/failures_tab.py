"""The Failures tab: failed jobs, and failed attempts of the last 24 hours, grouped by the
fingerprint of their error, the largest group first.

Selecting a group shows its newest failure (with its traceback) below the list and in the
detail pane; "Show jobs" (or a double-click) shows the group's jobs in the job table, and
"Retry group…" retries its failed jobs through the bulk action."""

from __future__ import annotations

import asyncio
import logging
import time

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from jobdesk.console.access import gate
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import REFUSED, await_or_refuse, reason
from jobdesk.console.failures.failure_model import COL_ERROR, FailureGroupModel
from jobdesk.console.jobs.job_detail import monospace
from jobdesk.console.list_table import list_table
from jobdesk.console.shown_gate import on_screen
from jobdesk.console.tasks import spawn
from jobdesk.core.models import Status, short_id
from jobdesk.store.failures import WINDOW_HOURS, FailureGroup, FailureSample
from jobdesk.store.jobs import JobFilter

log = logging.getLogger("jobdesk.console")

COLUMN_WIDTHS = (80, 115, 120, 75, 75, 300)
REFRESH_MS = 3000  # while shown, live changes refresh the groups at most this often
# The groups are counted from every failed job, so a change re-reads them only when a cheap mark
# of the failures moved (`failures_mark`), or after a full refresh signal, or this long after the
# last read (failed attempts age out of the 24-hour window, slowly).
FULL_READ_S = 600.0

RETRY_TIP = "Retry every failed job of this group, 1,000 per transaction"


class FailuresTab(QWidget):
    jobs_requested = Signal(object)  # a JobFilter: show these jobs in the job table
    retry_requested = Signal(object)  # a JobFilter: retry these jobs (bulk, after a dry run)
    job_clicked = Signal(str)  # a sample job, for the detail pane
    message = Signal(str)

    def __init__(self, connection: ConsoleConnection) -> None:
        super().__init__()
        self.connection = connection
        self.active = False
        self.writable = False
        self.read_only_reason: str | None = None
        self.model = FailureGroupModel()
        self.table = list_table(self.model, COLUMN_WIDTHS)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._selected())
        self.table.doubleClicked.connect(lambda _index: self.show_jobs())
        self._load: asyncio.Task[None] | None = None
        self._sample_task: asyncio.Task[None] | None = None
        self.sample: FailureSample | None = None

        self.summary = QLabel(f"Failed jobs, and failed attempts of the last {WINDOW_HOURS} hours, "
                              "grouped by error (numbers, ids and quoted values set aside)")
        self.summary.setObjectName("hint")
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.reload)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.refresh_button)

        self.sample_label = QLabel("Select a group to see its newest failure.")
        self.sample_label.setWordWrap(True)
        self.sample_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.traceback_view = QPlainTextEdit()
        self.traceback_view.setReadOnly(True)
        self.traceback_view.setFont(monospace())
        self.traceback_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.traceback_view.setPlaceholderText("sample traceback")
        self.show_button = QPushButton("Show jobs")
        self.show_button.setToolTip("Show this group's jobs in the job table (or double-click the group)")
        self.show_button.clicked.connect(self.show_jobs)
        self.retry_button = QPushButton("Retry group…")
        self.retry_button.clicked.connect(self.retry_group)
        buttons = QHBoxLayout()
        buttons.addWidget(self.sample_label, 1)
        buttons.addWidget(self.show_button)
        buttons.addWidget(self.retry_button)
        below = QWidget()
        below_layout = QVBoxLayout(below)
        below_layout.setContentsMargins(0, 4, 0, 0)
        below_layout.addLayout(buttons)
        below_layout.addWidget(self.traceback_view, 1)

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(below)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(top)
        layout.addWidget(split, 1)

        self._throttle = QTimer(self, singleShot=True, interval=REFRESH_MS)
        self._throttle.timeout.connect(self._changed)
        self._mark: tuple[object, ...] | None = None  # the failures' mark when the groups were read
        self._loaded_at = 0.0  # time.monotonic() of that read
        self._full = False  # a full refresh was asked for since
        self.update_enabled()

    # -- loading ----------------------------------------------------------------------------

    def set_active(self, active: bool) -> None:
        self.active = active
        if active and self.isVisible():
            self.reload()

    def set_read_only(self, reason: str | None) -> None:
        """Read-only for `reason` (Retry group stays, disabled, and says why), or writable with None."""
        self.read_only_reason = reason
        self.writable = reason is None
        self.update_enabled()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802
        super().showEvent(event)
        if self.active:
            self.reload()

    def on_jobs_changed(self, ids: set[str] | None) -> None:
        if ids is None:
            self._full = True  # a bulk action, a reconnection: read the groups whatever the mark
        if self.active and on_screen(self) and not self._throttle.isActive():
            self._throttle.start()

    def _changed(self) -> None:
        """The throttle ran out: read the groups again if the failures may have changed."""
        if not self.active:
            return
        if self._load is not None and not self._load.done():
            return  # one load at a time; the throttle brings the next
        self._load = spawn(self._load_if_changed(), "failure-groups")

    async def _load_if_changed(self) -> None:
        full = self._full or time.monotonic() - self._loaded_at >= FULL_READ_S
        if not full:
            mark = await await_or_refuse(self.connection.run(lambda jobs: jobs.failures_mark()), self._refused)
            if mark is REFUSED or mark == self._mark:
                return
        await self.load()

    async def _read_groups(self) -> tuple[tuple[object, ...], list[FailureGroup]]:
        """The failures' mark, then the groups it stands for."""
        mark = await self.connection.run(lambda jobs: jobs.failures_mark())
        return mark, await self.connection.run(lambda jobs: jobs.failure_groups())

    def _refused(self, exc: BaseException) -> None:
        self.message.emit(f"cannot load the failures: {reason(exc)}")

    def stop_timers(self) -> None:
        self._throttle.stop()

    def reload(self) -> None:
        if not self.active:
            return
        if self._load is not None and not self._load.done():
            return  # one load at a time; the throttle brings the next
        self._load = spawn(self.load(), "failure-groups")

    async def load(self) -> None:
        """Fetch the groups and show them, keeping the selected group selected."""
        selected = self.selected_group()
        self._full = False
        loaded = await await_or_refuse(self._read_groups(), self._refused)
        if loaded is REFUSED:
            return
        mark, groups = loaded
        self._mark, self._loaded_at = mark, time.monotonic()
        self.model.set_groups(groups)
        total = sum(g.failed_jobs for g in groups)
        self.summary.setText(f"{len(groups):,} error group(s) · {total:,} failed job(s), and failed attempts of "
                             f"the last {WINDOW_HOURS} hours, grouped by error")
        row = self.model.row_of(selected.fingerprint) if selected else None
        if row is not None:
            self.table.selectRow(row)
        self.update_enabled()

    # -- selection --------------------------------------------------------------------------

    def selected_group(self) -> FailureGroup | None:
        rows = self.table.selectionModel().selectedRows()
        group = self.model.row_at(rows[0].row()) if rows else None
        return group if isinstance(group, FailureGroup) else None

    def select_group(self, fingerprint: str) -> bool:
        row = self.model.row_of(fingerprint)
        if row is None:
            return False
        self.table.selectRow(row)
        self.table.scrollTo(self.model.index(row, COL_ERROR))
        return True

    def update_enabled(self) -> None:
        group = self.selected_group()
        self.show_button.setEnabled(group is not None)
        gate(self.retry_button, group is not None and group.failed_jobs > 0 and self.writable, self.read_only_reason,
             RETRY_TIP)

    def _selected(self) -> None:
        self.update_enabled()
        group = self.selected_group()
        if group is None:
            return
        if self.sample is not None and self._sample_fingerprint == group.fingerprint:
            return
        if self._sample_task is not None:
            self._sample_task.cancel()
        self._sample_task = spawn(self._load_sample(group.fingerprint), "failure-sample")

    _sample_fingerprint: str | None = None

    async def _load_sample(self, fingerprint: str) -> None:
        sample = await await_or_refuse(self.connection.run(lambda jobs: jobs.failure_sample(fingerprint)), lambda exc:
                                       self.message.emit(f"cannot load the group's newest failure: {reason(exc)}"))
        if sample is REFUSED:
            return
        self.sample, self._sample_fingerprint = sample, fingerprint
        if sample is None:
            self.sample_label.setText("This group's failures are no longer in the window.")
            self.traceback_view.setPlainText("")
            return
        self.sample_label.setText(f"Newest: job {short_id(sample.job_id)} ({sample.type}) — "
                                  f"{(sample.error_message or '').splitlines()[0] if sample.error_message else ''}")
        self.traceback_view.setPlainText(sample.traceback or sample.error_message or "(no traceback recorded)")
        self.job_clicked.emit(sample.job_id)

    # -- actions ----------------------------------------------------------------------------

    def show_jobs(self, _index: QModelIndex | None = None) -> None:
        group = self.selected_group()
        if group is not None:
            self.jobs_requested.emit(group.job_filter())

    def retry_group(self) -> None:
        group = self.selected_group()
        if group is not None:
            self.retry_requested.emit(JobFilter(statuses=frozenset({Status.FAILED}), fingerprint=group.fingerprint))
