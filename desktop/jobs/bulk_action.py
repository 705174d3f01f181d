"""Retry or cancel every job that matches a filter, not only the selection.

A dry run counts the jobs first; the confirmation names that number and the filter in words.
The run then goes a chunk of at most 1,000 jobs at a time (one transaction and one audit row
each, `JobService.bulk_apply`) while a small non-modal panel shows its progress, and Stop ends
it after the chunk under way."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from jobdesk.console.access import gate
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import icon
from jobdesk.core.rules import LEGAL_FROM, BulkChunk
from jobdesk.service.jobs import BulkCount, JobService
from jobdesk.store.jobs import JobFilter, StatusCounts

log = logging.getLogger("jobdesk.console")

VERBS = {"retry": ("Retry", "Retrying", "retried"), "cancel": ("Cancel", "Cancelling", "cancelled")}


def confirmation_text(count: BulkCount) -> str:
    """The question before a bulk action: how many jobs, and which."""
    verb = VERBS[count.action][0]
    what = "jobs" if count.count != 1 or count.capped else "job"
    text = f"{verb} all {count.describe()} {what} matching {count.filter.describe()}?"
    if count.action == "cancel":
        text += "\n\nJobs that depend on them are cancelled too."
    text += f"\n\nThey are {VERBS[count.action][2]} 1,000 at a time; Stop ends the run after the chunk under way."
    return text


def matching_label(action: str, counts: StatusCounts | None, filt: JobFilter) -> str:
    """"Retry all 1,234 matching…", from the status counts the Jobs tab already has."""
    verb = VERBS[action][0]
    if counts is None:
        return f"{verb} all matching…"
    statuses = LEGAL_FROM[action] & filt.statuses if filt.statuses else LEGAL_FROM[action]
    n = sum(counts.counts.get(s, 0) for s in statuses)
    capped = any(not counts.exact(s) for s in statuses)
    return f"{verb} all {n:,}{'+' if capped else ''} matching…"


class BulkProgress(QDialog):
    """The non-modal panel of one bulk run: what it does, a progress bar and Stop."""

    stop_requested = Signal()

    def __init__(self, parent: QWidget | None, count: BulkCount) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"{VERBS[count.action][0]} all matching")
        self.setModal(False)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
        self.title = QLabel(f"{VERBS[count.action][1]} {count.describe()} job(s) matching {count.filter.describe()}")
        self.title.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, max(1, count.count))
        self.bar.setValue(0)
        self.status = QLabel("starting…")
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self._stop)
        buttons = QDialogButtonBox()
        buttons.addButton(self.stop_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.close_button = buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.close_button.setEnabled(False)
        self.close_button.clicked.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.bar)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        self.resize(460, self.sizeHint().height())

    def _stop(self) -> None:
        self.stop_button.setEnabled(False)
        self.status.setText(self.status.text() + " — stopping after this chunk…")
        self.stop_requested.emit()

    def progress(self, done: int, total: int, chunks: int) -> None:
        self.bar.setMaximum(max(total, done, 1))
        self.bar.setValue(done)
        self.status.setText(f"{done:,} of {total:,} done, in {chunks:,} transaction(s)")

    def finish(self, text: str) -> None:
        self.status.setText(text)
        self.stop_button.setEnabled(False)
        self.close_button.setEnabled(True)


class BulkRun(QObject):
    """One bulk action under way: chunk after chunk until done, stopped or failed."""

    finished = Signal(str)  # what happened, in words

    def __init__(self, connection: ConsoleConnection, count: BulkCount, panel: BulkProgress) -> None:
        super().__init__(panel)
        self.connection = connection
        self.count = count
        self.panel = panel
        self.done = 0  # matching jobs acted on
        self.changed = 0  # jobs changed, dependants included
        self.chunks = 0
        self.stopped = False
        self.outcome: str | None = None
        panel.stop_requested.connect(self.stop)
        self.task: asyncio.Task[None] | None = spawn(self._run(), f"bulk-{count.action}")

    def stop(self) -> None:
        self.stopped = True

    async def _run(self) -> None:
        action, filt, upto = self.count.action, self.count.filter, self.count.upto_seq
        after: int | None = 0
        try:
            with self.connection.bulk_changes():  # live reloads slow down while the run goes
                while after is not None and not self.stopped:
                    start = after

                    def apply(jobs: JobService) -> Awaitable[BulkChunk]:
                        return jobs.bulk_apply(action, filt, after_seq=start, upto_seq=upto)

                    chunk = await self.connection.act(apply)
                    self.done += len(chunk.picked)
                    self.changed += len(chunk.changed)
                    self.chunks += 1 if chunk.picked else 0
                    self.panel.progress(self.done, self.count.count, self.chunks)
                    after = chunk.next_seq
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self._end(f"{VERBS[action][0]} stopped by an error after {self.done:,} job(s): {reason(exc)}")
            return
        past = VERBS[action][2]
        extra = self.changed - self.done
        more = f" (and {extra:,} dependant job(s))" if extra > 0 else ""
        if self.stopped and after is not None:
            self._end(f"Stopped: {past} {self.done:,} of {self.count.describe()} job(s){more}")
        else:
            self._end(f"Done: {past} {self.done:,} job(s){more}, in {self.chunks:,} transaction(s)")

    def _end(self, text: str) -> None:
        self.outcome = text
        self.panel.finish(text)
        self.finished.emit(text)


class BulkActions(QObject):
    """The "Retry all N matching…" and "Cancel all N matching…" actions over the job table's filter."""

    message = Signal(str)
    error = Signal(str)

    def __init__(self, parent: QWidget, connection: ConsoleConnection,
                 current_filter: Callable[[], JobFilter]) -> None:
        super().__init__(parent)
        self._parent = parent
        self.connection = connection
        self.current_filter = current_filter
        self.connected = False
        self.writable = False
        self.confirm_box: QMessageBox | None = None
        self.run: BulkRun | None = None
        self.read_only_reason: str | None = None  # why the console cannot act, for the tooltips
        self.actions: dict[str, QAction] = {}
        for name in VERBS:
            action = QAction(icon(name), matching_label(name, None, JobFilter()), parent)
            action.triggered.connect(lambda _checked=False, n=name: self.ask(n))
            self.actions[name] = action
        self.update_enabled()

    def set_state(self, *, connected: bool) -> None:
        self.connected = connected
        self.update_enabled()

    def set_read_only(self, reason: str | None) -> None:
        """Read-only for `reason` (the actions stay, disabled, and say why), or writable with None."""
        self.read_only_reason = reason
        self.writable = reason is None
        self.update_enabled()

    def busy(self) -> bool:
        return self.run is not None and self.run.outcome is None

    def update_enabled(self) -> None:
        for name, action in self.actions.items():
            gate(action, self.connected and self.writable and not self.busy(), self.read_only_reason,
                 f"{VERBS[name][0]} every job that matches the job table's filter, not only the selection")

    def set_counts(self, counts: StatusCounts) -> None:
        filt = self.current_filter()
        for name, action in self.actions.items():
            action.setText(matching_label(name, counts, filt))

    def ask(self, action: str, filt: JobFilter | None = None) -> None:
        """Count (dry run), then ask; the run starts once the user says yes."""
        if not (self.connected and self.writable) or self.busy():
            return
        spawn(self.confirm(action, self.current_filter() if filt is None else filt), f"bulk-count-{action}")

    async def confirm(self, action: str, filt: JobFilter) -> BulkCount | None:
        """The dry run and the (non-modal) question; returns the count asked about."""
        try:
            count = await self.connection.run(lambda jobs: jobs.bulk_count(action, filt))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.error.emit(f"cannot count the matching jobs: {reason(exc)}")
            return None
        if count.count == 0:
            self.message.emit(f"no job matching {filt.describe()} can be {VERBS[action][2]}")
            return count
        box = QMessageBox(QMessageBox.Icon.Question, "jobdesk", confirmation_text(count),
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self._parent)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        box.button(QMessageBox.StandardButton.Yes).setText(f"{VERBS[action][0]} {count.describe()}")
        box.finished.connect(lambda result, c=count: self._answered(box, result, c))
        self.confirm_box = box
        box.open()
        return count

    def _answered(self, box: QMessageBox, result: int, count: BulkCount) -> None:
        if self.confirm_box is box:
            self.confirm_box = None
        box.deleteLater()
        if box.standardButton(box.clickedButton()) == QMessageBox.StandardButton.Yes:
            self.start(count)

    def start(self, count: BulkCount) -> BulkRun:
        """Run the bulk action just counted, with its progress panel."""
        panel = BulkProgress(self._parent, count)
        run = BulkRun(self.connection, count, panel)
        run.finished.connect(self._finished)
        self.run = run
        panel.show()
        self.update_enabled()
        return run

    def _finished(self, text: str) -> None:
        self.message.emit(text)
        self.update_enabled()
