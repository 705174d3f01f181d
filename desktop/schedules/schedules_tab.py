"""The Schedules tab: every periodic job with its expression (and in words), timezone, next and
last run, whether it is paused and its recent runs coloured by status; the jobs the selected one
created; Pause, Resume and Run now.

It reads while shown (every few seconds, and at once when shown), and only marks itself stale
while hidden, as the Pipelines tab does."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout, QWidget

from jobdesk.console.access import gate
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, attempt, reason
from jobdesk.console.jobs.status_delegate import StatusChipDelegate
from jobdesk.console.list_table import list_table
from jobdesk.console.schedules.schedule_model import COL_RECENT, TICK_COL_STATUS, ScheduleTableModel, TickTableModel
from jobdesk.console.sparklines import RunsDelegate
from jobdesk.console.tasks import spawn
from jobdesk.runtime.scheduler import ScheduleRecord

REFRESH_MS = 3000


class SchedulesTab(QWidget):
    job_activated = Signal(str)  # a job of the schedule, double-clicked
    message = Signal(str)

    def __init__(self, connection: ConsoleConnection) -> None:
        super().__init__()
        self.connection = connection
        self.model = ScheduleTableModel()
        self.table = list_table(self.model, (130, 90, 100, 90, 150, 150, 70, 250, 210))
        self.table.setItemDelegateForColumn(COL_RECENT, RunsDelegate(self.table))
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._selection_changed())
        self.ticks = TickTableModel()
        self.tick_table = list_table(self.ticks, (170, 260, 150))
        self.tick_table.setItemDelegateForColumn(TICK_COL_STATUS, StatusChipDelegate(self.tick_table))
        self.tick_table.doubleClicked.connect(self._tick_activated)
        self.pause_button = QPushButton("Pause")
        self.resume_button = QPushButton("Resume")
        self.pause_button.clicked.connect(lambda: spawn(self.set_paused(True), "schedule-pause"))
        self.resume_button.clicked.connect(lambda: spawn(self.set_paused(False), "schedule-resume"))
        self.run_button = QPushButton("Run now")
        self.run_button.setToolTip("Enqueue one run of this schedule now; its next regular run does not move")
        self.run_button.clicked.connect(lambda: spawn(self.run_now(), "schedule-run"))
        self.summary = QLabel()
        self.empty_hint = QLabel("No schedules yet. Add one with "
                                 "<code>jobdesk schedule add NAME --cron \"0 2 * * *\" --type T</code>, or declare "
                                 "<code>SCHEDULES</code> in a processor module.")
        self.empty_hint.setWordWrap(True)
        self.ticks_title = QLabel("Jobs of the selected schedule")

        buttons = QHBoxLayout()
        buttons.addWidget(self.pause_button)
        buttons.addWidget(self.resume_button)
        buttons.addWidget(self.run_button)
        buttons.addStretch(1)
        buttons.addWidget(self.summary)
        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        lower_layout.addWidget(self.ticks_title)
        lower_layout.addWidget(self.tick_table, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(lower)
        split.setSizes([300, 250])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.empty_hint)
        layout.addWidget(split, 1)

        self._timer = QTimer(self, interval=REFRESH_MS)
        self._timer.timeout.connect(lambda: spawn(self.refresh(), "schedules-refresh"))
        self._clock = QTimer(self, interval=1000)
        self._clock.timeout.connect(self.model.tick)
        self._active = False
        self._busy = False
        self._update_buttons()

    # -- visibility and connection ----------------------------------------------------------

    def set_active(self, active: bool) -> None:
        self._active = active
        self._sync_timers()
        if active and self.isVisible():
            spawn(self.refresh(), "schedules-first-read")
        self._update_buttons()

    def showEvent(self, event: object) -> None:  # noqa: N802
        super().showEvent(event)  # type: ignore[arg-type]
        self._sync_timers()
        if self._active:
            spawn(self.refresh(), "schedules-shown")

    def hideEvent(self, event: object) -> None:  # noqa: N802
        super().hideEvent(event)  # type: ignore[arg-type]
        self._sync_timers()

    def _sync_timers(self) -> None:
        running = self._active and self.isVisible()
        for timer in (self._timer, self._clock):
            if running and not timer.isActive():
                timer.start()
            elif not running:
                timer.stop()

    def stop_timers(self) -> None:
        self._timer.stop()
        self._clock.stop()

    # -- reading ----------------------------------------------------------------------------

    async def refresh(self) -> None:
        try:
            records = await self.connection.run(lambda jobs: jobs.schedules())
        except EXPECTED as exc:
            self.summary.setText(f"cannot list schedules: {reason(exc)}")
            return
        self.model.set_schedules(records)
        paused = sum(1 for r in records if r.paused)
        self.summary.setText(f"{len(records)} schedule(s)" + (f" · {paused} paused" if paused else ""))
        self.empty_hint.setVisible(not records)
        await self._load_ticks()
        self._update_buttons()

    def selected(self) -> ScheduleRecord | None:
        rows = self.table.selectionModel().selectedRows()
        record = self.model.row_at(rows[0].row()) if rows else None
        return record if isinstance(record, ScheduleRecord) else None

    def select(self, name: str) -> bool:
        row = self.model.row_of(name)
        if row is None:
            return False
        self.table.selectRow(row)
        return True

    def _selection_changed(self) -> None:
        self._update_buttons()
        spawn(self._load_ticks(), "schedule-ticks")

    async def _load_ticks(self) -> None:
        record = self.selected()
        if record is None:
            self.ticks.set_ticks([])
            self.ticks_title.setText("Jobs of the selected schedule")
            return
        name = record.schedule.name
        try:
            ticks = await self.connection.run(lambda jobs: jobs.schedule_jobs(name))
        except EXPECTED as exc:
            self.ticks_title.setText(f"cannot read the jobs of {name}: {reason(exc)}")
            return
        now_selected = self.selected()
        if now_selected is not None and now_selected.schedule.name == name:
            self.ticks.set_ticks(ticks)
            self.ticks_title.setText(f"Jobs of {name}, newest first ({len(ticks)} shown)")

    def _tick_activated(self, index: QModelIndex) -> None:
        job_id = self.ticks.data(index, Qt.ItemDataRole.UserRole)
        if job_id:
            self.job_activated.emit(job_id)

    # -- actions ----------------------------------------------------------------------------

    def _update_buttons(self) -> None:
        record = self.selected()
        can = self.connection.is_connected and not self._busy
        why = self.connection.read_only_reason
        gate(self.pause_button, can and record is not None and not record.paused, why,
             "No jobs from this schedule until it is resumed")
        gate(self.resume_button, can and record is not None and record.paused, why,
             "Go on from the next tick; ticks passed while paused are not run")
        gate(self.run_button, can and record is not None, why,
             "Enqueue one run of this schedule now; its next regular run does not move")

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._update_buttons()

    async def set_paused(self, paused: bool) -> bool:
        record = self.selected()
        if record is None:
            return False
        name = record.schedule.name
        verb = "pause" if paused else "resume"
        done = await attempt(self.connection.act(lambda jobs: jobs.pause_schedule(name) if paused
                                                 else jobs.resume_schedule(name)), self._set_busy,
                             lambda exc: self.message.emit(f"cannot {verb} schedule {name}: {reason(exc)}"))
        if done is None:
            return False
        self.message.emit(f"schedule {name} {verb}d")
        await self.refresh()
        return True

    async def run_now(self) -> str | None:
        """Enqueue one run of the selected schedule now; say which job it is. None if it failed."""
        record = self.selected()
        if record is None:
            return None
        name = record.schedule.name
        job_id = await attempt(self.connection.act(lambda jobs: jobs.run_schedule(name)), self._set_busy,
                               lambda exc: self.message.emit(f"cannot run schedule {name}: {reason(exc)}"))
        if job_id is None:
            return None
        self.message.emit(f"schedule {name}: job {job_id} enqueued now")
        await self.refresh()
        return job_id
