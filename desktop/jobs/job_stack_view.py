"""The detail pane's Stack tab: what the selected job is doing now, its Python stack, asked of
the worker that runs it (`JobService.job_stack`), outermost frame first as a traceback prints it.
After the job has ended, the last stack taken of it, under a line that says so.

It asks when the tab is opened on a job, and on Refresh; never by itself while it stays open:
each question is a round trip to a worker, and costs nothing while nobody asks."""

from __future__ import annotations

import asyncio

from PySide6.QtGui import QFontDatabase, QShowEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.table_model import Query
from jobdesk.console.tasks import spawn
from jobdesk.core.job_stack import JobStack, StackFrame
from jobdesk.core.models import Status

PATH_PARTS = 3  # a frame's file is shown by its last parts: the pane is narrow (the full path is its tooltip)


def frame_text(frame: StackFrame) -> str:
    """A frame as a traceback prints it, with a long path cut to its last parts."""
    parts = frame.file.replace("\\", "/").split("/")
    short = frame.file if len(parts) <= PATH_PARTS + 1 else "…/" + "/".join(parts[-PATH_PARTS:])
    return StackFrame(short, frame.line, frame.function, frame.source).text()


class JobStackView(QWidget):
    """The stack of one job. `show_job` is called with each fresh detail of the selected job;
    showing the tab asks for the job's stack, once per job."""

    def __init__(self, query: Query | None = None) -> None:
        super().__init__()
        self.query = query
        self.state = QLabel("")
        self.state.setObjectName("hint")
        self.state.setWordWrap(True)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Ask the worker for the job's stack now")
        self.refresh_button.clicked.connect(self.refresh)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        top = QHBoxLayout()
        top.addWidget(self.state, 1)
        top.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.text, 1)
        self.job_id: str | None = None
        self.status: Status | None = None
        self.stack: JobStack | None = None  # the stack shown
        self.asked_for: str | None = None  # the job last asked about: opening the tab again asks no more
        self._asking: asyncio.Task[None] | None = None
        self.clear()

    def clear(self) -> None:
        if self._asking is not None:
            self._asking.cancel()
            self._asking = None
        self.job_id, self.status, self.stack, self.asked_for = None, None, None, None
        self.text.clear()
        self.text.setToolTip("")
        self.state.setText("Select a job")
        self.refresh_button.setEnabled(False)

    def show_job(self, job_id: str, status: Status) -> None:
        """A detail of `job_id` was loaded: asked for when the tab is the one shown."""
        if job_id != self.job_id:
            self.clear()
            self.job_id = job_id
            self.state.setText("Refresh asks the worker what this job is doing now")
        self.status = status
        self.refresh_button.setEnabled(self.query is not None and self._asking is None)
        if self.isVisible() and self.asked_for != job_id:
            self.refresh()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        """The tab was shown (a tab's own event: no signal of the tab widget, which fires while
        the pane is torn down): ask once per job."""
        super().showEvent(event)
        if self.job_id is not None and self.asked_for != self.job_id:
            self.refresh()

    def refresh(self) -> None:
        if self.query is None or self.job_id is None or self._asking is not None:
            return
        self.asked_for = self.job_id
        self.refresh_button.setEnabled(False)
        self.state.setText("Asking the worker…")
        self._asking = spawn(self._ask(self.job_id), "job-stack")

    async def _ask(self, job_id: str) -> None:
        assert self.query is not None
        try:
            stack: JobStack = await self.query(lambda jobs: jobs.job_stack(job_id))
        except asyncio.CancelledError:
            raise
        except EXPECTED as exc:  # not running, no answer, the database away: said in the tab
            if job_id == self.job_id:
                self.stack = None
                self.text.clear()
                self.state.setText(reason(exc))
            return
        finally:
            if self._asking is asyncio.current_task():
                self._asking = None
                self.refresh_button.setEnabled(self.job_id is not None)
        if job_id != self.job_id:
            return
        self.stack = stack
        self.state.setText(stack.headline())
        self.text.setPlainText("\n".join(frame_text(f) for f in stack.frames) or "(no frames: the job had not started)")
        self.text.setToolTip("\n".join(f'{f.file}, line {f.line}' for f in stack.frames))
