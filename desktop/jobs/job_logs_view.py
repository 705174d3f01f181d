"""The detail pane's Logs tab: the log lines a job's processor emitted, every attempt's, with a
rule where each attempt begins; while the job runs, new lines are read every second and
appended (the view stays at the bottom if it was there); a queued job is read again whenever its
detail changes. Reads go through the service, and poll, so they work through a pooler too."""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from jobdesk.console.errors import REFUSED, await_or_refuse
from jobdesk.console.table_model import Query
from jobdesk.console.tasks import spawn
from jobdesk.core.job_report import LOGS_FINISHED, JobLogLine
from jobdesk.core.models import Status

log = logging.getLogger("jobdesk.console")

FOLLOW_EVERY_MS = 1000
READ_LIMIT = 2000  # lines per read; a follow reads on at once while there are more
LEVEL_COLOURS = {"WARNING": "#b7791f", "ERROR": "#c53030", "CRITICAL": "#c53030", "DEBUG": "#718096"}


def line_html(line: JobLogLine) -> str:
    """One line: its local time, level and logger, then its message (escaped; colour by level)."""
    when = line.at.astimezone().strftime("%H:%M:%S.%f")[:-3]
    colour = LEVEL_COLOURS.get(line.level)
    padded = f"{line.level:<7}".replace(" ", "&nbsp;")  # the messages line up
    level = f"<span style='color:{colour}'>{padded}</span>" if colour else padded
    text = html.escape(line.message).replace("\n", "<br>")
    return (f"<span style='color:#718096'>{when}</span> {level} "
            f"<b>{html.escape(line.logger)}</b>: {text}")


def attempt_html(attempt: int) -> str:
    return f"<span style='color:#3182ce'><b>━━ attempt {attempt} ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━</b></span>"


class JobLogsView(QWidget):
    """The lines of one job. `show_job` is called with each fresh detail of the selected job:
    a new job starts the view again; the same one only learns whether it still runs."""

    def __init__(self, query: Query | None = None, on_count: Callable[[int], None] | None = None) -> None:
        super().__init__()
        self.query = query
        self.on_count = on_count  # the tab's title shows how many lines
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.state = QLabel("")
        self.state.setObjectName("hint")
        self.state.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(self.state)
        layout.addWidget(self.text, 1)
        self.timer = QTimer(self, interval=FOLLOW_EVERY_MS)
        self.timer.timeout.connect(self._read_more)
        self.job_id: str | None = None
        self.status: Status | None = None
        self.after = (0, 0)  # the last line shown: (attempt, seq)
        self.count = 0
        self._reading: asyncio.Task[None] | None = None
        self._finished_read = False  # the read after the job finished is done: nothing more can come

    def clear(self) -> None:
        self.timer.stop()
        if self._reading is not None:
            self._reading.cancel()
            self._reading = None
        self.job_id, self.status, self.after, self.count = None, None, (0, 0), 0
        self._finished_read = False
        self.text.clear()
        self._tell("")
        self._counted()

    def show_job(self, job_id: str, status: Status) -> None:
        if job_id != self.job_id:
            self.clear()
            self.job_id = job_id
        self.status = status
        if status not in LOGS_FINISHED:
            self._finished_read = False  # retried, or not finished yet: more lines may come
        # Only a running job writes lines; a queued one is read again when its detail changes.
        if status == Status.IN_PROGRESS and not self.timer.isActive():
            self.timer.start()
        elif status != Status.IN_PROGRESS:
            self.timer.stop()
        self._read_more()

    @property
    def following(self) -> bool:
        return self.timer.isActive()

    def _read_more(self) -> None:
        if self.query is None or self.job_id is None or self._finished_read:
            return
        if self._reading is None:
            self._reading = spawn(self._read(self.job_id, self.status), "job-logs")

    async def _read(self, job_id: str, status: Status | None) -> None:
        assert self.query is not None
        after = self.after
        try:
            lines = await await_or_refuse(self.query(lambda jobs: jobs.job_logs(job_id, after=after, limit=READ_LIMIT)),
                                          lambda exc: self._tell(f"cannot read the log lines: {exc}"))
        finally:
            if self._reading is asyncio.current_task():
                self._reading = None
        if lines is REFUSED:
            return
        if job_id != self.job_id:
            return
        self._append(lines)
        more = len(lines) >= READ_LIMIT
        if status in LOGS_FINISHED and not more:
            self._finished_read = True  # read after the job finished: every line is in
            self.timer.stop()
        self._say()
        if more:
            self._read_more()

    def _append(self, lines: list[JobLogLine]) -> None:
        if not lines:
            return
        bar = self.text.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        parts = []
        for line in lines:
            if line.attempt != self.after[0]:
                parts.append(attempt_html(line.attempt))
            parts.append(line_html(line))
            self.after = (line.attempt, line.seq)
        self.text.appendHtml("<br>".join(parts))
        self.count += len(lines)
        self._counted()
        if at_bottom:
            self.text.moveCursor(QTextCursor.MoveOperation.End)
            bar.setValue(bar.maximum())

    def _say(self) -> None:
        lines = f"{self.count} line{'s' if self.count != 1 else ''}"
        if self.following:
            self._tell(f"{lines} · following the running job")
        else:
            self._tell(lines if self.count else "no log lines")

    def _tell(self, text: str) -> None:
        """The line above the lines; hidden while it has nothing to say (no job shown)."""
        self.state.setText(text)
        self.state.setVisible(bool(text))

    def _counted(self) -> None:
        if self.on_count is not None:
            self.on_count(self.count)
