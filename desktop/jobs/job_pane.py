"""The job pane beside the tabs: the detail of one job, loaded through the service, and shown only
on the tabs where a job is selected.

Jobs, Pipelines and Failures select a job (a row, a DAG node, a group's sample), so the pane
stands beside them. Schedules, Approvals and Metrics have no use for it: Schedules selects a
schedule, Approvals shows its job's input and result itself, and Metrics is about every job; they
get the whole width instead, and an unrelated job never shows (with its actions) beside them."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QScrollArea, QWidget

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import REFUSED, await_or_refuse
from jobdesk.console.jobs.job_detail import JobDetail
from jobdesk.console.tasks import spawn
from jobdesk.core.models import short_id


class JobPane(QObject):
    """Owns the detail widget, the scroll area it sits in, and the load of the job it shows."""

    message = Signal(str)  # a load that failed, for the status bar
    shown_job = Signal()  # the detail now shows a job (its record in `detail.record`)

    def __init__(self, connection: ConsoleConnection, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.connection = connection
        self.detail = JobDetail(connection.run)  # its Logs tab reads through the connection
        self.area = QScrollArea()  # the pane scrolls rather than push the docks off a small screen
        self.area.setWidget(self.detail)
        self.area.setWidgetResizable(True)
        self.area.setFrameShape(QScrollArea.Shape.NoFrame)
        self._task: asyncio.Task[None] | None = None
        self.loading: str | None = None  # the job whose detail is being fetched
        self._tabs_with_pane: tuple[QWidget, ...] = ()
        self.current: QWidget | None = None  # the tab shown
        self._job_by_tab: dict[QWidget | None, str | None] = {}  # the job each tab last showed

    # -- where it shows -----------------------------------------------------------------------

    def show_beside(self, tabs: Collection[QWidget]) -> None:
        """The tabs the pane stands beside; on any other it is hidden."""
        self._tabs_with_pane = tuple(tabs)

    def follow_tab(self, current: QWidget | None) -> None:
        """Shown beside `current` if it selects jobs, with the job last shown there (or none): a
        job chosen on one tab never shows beside another."""
        self.current = current
        shown = current in self._tabs_with_pane
        self.area.setVisible(shown)
        if not shown:
            return
        wanted = self._job_by_tab.get(current)
        if wanted is None:
            self.clear()
        else:  # read again: it may have changed while another tab was shown
            self.load(wanted)

    @property
    def shown(self) -> bool:
        return not self.area.isHidden()

    # -- what it shows ------------------------------------------------------------------------

    @property
    def target(self) -> str | None:
        """The job the pane shows or is about to show: the one being loaded wins (the user has
        moved on from the one shown)."""
        return self.loading or self.detail.job_id

    def load(self, job_id: str) -> None:
        self._job_by_tab[self.current] = job_id
        if self._task is not None:
            self._task.cancel()
        self.loading = job_id
        self._task = spawn(self._fetch(job_id), "job-detail")

    def clear(self) -> None:
        self._job_by_tab[self.current] = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.loading = None
        self.detail.clear()

    async def _fetch(self, job_id: str) -> None:
        try:
            detail = await await_or_refuse(self.connection.run(lambda jobs: jobs.job_detail(job_id)), lambda exc:
                                           self.message.emit(f"cannot load job {short_id(job_id)}: {exc}"))
        finally:
            if self.loading == job_id:
                self.loading = None
        if detail is REFUSED:
            return
        self.detail.show_job(detail)
        self.shown_job.emit()
