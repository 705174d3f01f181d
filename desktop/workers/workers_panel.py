"""The Workers panel: every worker in the `workers` table, live, with pause, resume, drain and
stop for any of them (on any host) through the control channel, a warning for each queued job
type that no live worker serves, the limits on the claims (`limits_table`), and every known type
with its limits in force, paused or resumed and limited here (`type_limits_view`)."""

from __future__ import annotations

import html
import logging
import time
from collections.abc import Callable

from PySide6.QtCore import QItemSelection, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from jobdesk.console.access import gate
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED
from jobdesk.console.list_table import list_table
from jobdesk.console.shown_gate import on_screen
from jobdesk.console.tasks import spawn
from jobdesk.console.workers.job_links_delegate import JobLinksDelegate
from jobdesk.console.workers.limits_table import LimitsTable
from jobdesk.console.workers.type_limits_view import TypeLimitsView
from jobdesk.console.workers.worker_table_model import COL_JOBS, COLUMNS, WorkerTableModel
from jobdesk.core.errors import JobdeskError
from jobdesk.core.rules import worker_command_is_legal
from jobdesk.store import fleet
from jobdesk.store.fleet import UnservedType, WorkerRecord

log = logging.getLogger("jobdesk.console")

POLL_MS = 2000  # the workers table is read this often while connected
UNSERVED_EVERY_S = 5.0  # and the unserved job types this often, or at once when the served types change
MAX_WARNINGS = 5  # unserved types named one by one; more are counted

# Button label and tooltip of each command; which states it applies to is the engine's table
# (`worker.transitions.WORKER_COMMANDS_LEGAL_FROM`), and the worker must also not be lost.
COMMANDS: dict[str, tuple[str, str]] = {
    "pause": ("Pause", "Stop claiming new jobs; running jobs go on"),
    "resume": ("Resume", "Claim jobs again"),
    "drain": ("Drain", "Finish the running jobs, then exit"),
    "stop": ("Stop", "Stop now: running jobs get JOB_SHUTDOWN_TIMEOUT seconds, then go back to the queue"),
}
QUESTIONS = {
    "drain": "Drain worker {id} on {host}? It finishes its running jobs, then exits.",
    "stop": "Stop worker {id} on {host}? Its running jobs get {timeout:g} s to finish, then go back to the queue.",
}
COLUMN_WIDTHS = (90, 170, 60, 45, 200, 220, 60, 110, 240)


class WorkersPanel(QWidget):
    """Lists the workers of the connection's database and sends them commands."""

    job_link_clicked = Signal(str)  # a job id in the "Jobs in flight" column
    workers_loaded = Signal(list)  # every fetch: the WorkerRecords
    message = Signal(str)  # the outcome of a command, for a status bar

    def __init__(self, connection: ConsoleConnection, *, launch_action: QAction | None = None,
                 launched_pids: Callable[[], set[int]] = set, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.connection = connection
        self.lease_timeout_s = connection.settings.JOB_LEASE_TIMEOUT
        self.model = WorkerTableModel(self.lease_timeout_s, launched_pids)
        self.unserved: list[UnservedType] = []
        self.busy = False
        self._refreshing = False
        self._served: frozenset[str] | None = None
        self._unserved_at = 0.0

        self.table = list_table(self.model, COLUMN_WIDTHS[:len(COLUMNS)], padding=10)
        self.links = JobLinksDelegate(self.table)
        self.links.link_clicked.connect(self.job_link_clicked)
        self.table.setItemDelegateForColumn(COL_JOBS, self.links)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)

        self._build_warnings()
        buttons = self._build_buttons(launch_action)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(self.warning_box)
        layout.addLayout(buttons)
        layout.addWidget(self.table, 1)
        self.limits = LimitsTable()
        layout.addWidget(self.limits)
        self.types = TypeLimitsView(connection)
        self.types.changed.connect(lambda: spawn(self.refresh_limits(), "types-after-change"))
        self.types.message.connect(self.message)
        layout.addWidget(self.types)

        self._poll = QTimer(self, interval=POLL_MS)
        self._poll.timeout.connect(self._poll_due)
        self._clock = QTimer(self, interval=1000)
        self._clock.timeout.connect(self._tick)
        self._clock.start()
        connection.connected.connect(self._on_connected)
        connection.disconnected.connect(self._on_disconnected)
        connection.writable_changed.connect(lambda _w: self.update_buttons())
        # A type paused, resumed or limited anywhere announces `*` (everything may have changed).
        connection.jobs_changed.connect(lambda ids: self._reread_limits() if ids is None else None)
        if connection.is_connected:
            self._on_connected("")
        self.update_buttons()

    def _build_warnings(self) -> None:
        """The box above the table naming the queued job types no live worker serves."""
        self.warning_box = QWidget()
        self.warning_layout = QVBoxLayout(self.warning_box)
        self.warning_layout.setContentsMargins(0, 0, 0, 0)
        self.warning_layout.setSpacing(2)
        self.warning_box.hide()
        self._warning_labels: list[QLabel] = []

    def _build_buttons(self, launch_action: QAction | None) -> QHBoxLayout:
        """Launch worker (when given), the command buttons, the last error and the summary."""
        buttons = QHBoxLayout()
        self.launch_button = QToolButton()
        if launch_action is not None:
            self.launch_button.setDefaultAction(launch_action)
            self.launch_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
            buttons.addWidget(self.launch_button)
            buttons.addSpacing(12)
        else:
            self.launch_button.hide()
        self.command_buttons: dict[str, QPushButton] = {}
        for command, (label, tip) in COMMANDS.items():
            button = QPushButton(label)
            button.setToolTip(tip)
            button.clicked.connect(lambda _c=False, c=command: self._command_clicked(c))
            self.command_buttons[command] = button
            buttons.addWidget(button)
        self.error_label = QLabel()
        self.error_label.setObjectName("workersError")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        self.summary = QLabel("connecting…")
        self.summary.setObjectName("workersSummary")
        buttons.addSpacing(12)
        buttons.addWidget(self.error_label, 1)
        buttons.addStretch(0)
        buttons.addWidget(self.summary)
        return buttons

    # -- connection -------------------------------------------------------------------------

    def _on_connected(self, _description: str) -> None:
        self._served = None  # check the unserved types at once
        self._poll.start()
        spawn(self.refresh(), "workers-first-fetch")

    def _on_disconnected(self, _reason: str) -> None:
        self._poll.stop()
        self.summary.setText("disconnected")
        self.update_buttons()

    def stop(self) -> None:
        """Stop polling and ticking (the window is closing)."""
        self._poll.stop()
        self._clock.stop()

    # -- fetching ---------------------------------------------------------------------------

    def _poll_due(self) -> None:
        """The poll reads only while the panel is on screen (its dock shown, the window not
        minimised); it is read again as soon as it is shown."""
        if on_screen(self):
            spawn(self.refresh(), "workers-poll")

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802
        super().showEvent(event)
        if self.connection.is_connected:
            spawn(self.refresh(), "workers-shown")

    async def refresh(self) -> None:
        """Read the workers (and, when due, the unserved job types) and show them."""
        if self._refreshing or not self.connection.is_connected:
            return
        self._refreshing = True
        lease, served = self.lease_timeout_s, self._served
        due = time.monotonic() - self._unserved_at >= UNSERVED_EVERY_S
        try:
            view = await self.connection.run(
                lambda jobs: jobs.workers_view(lease, served_before=served, with_unserved=due))
            uses = await self.connection.run(lambda jobs: jobs.limits()) if due else None
            types = await self.connection.run(lambda jobs: jobs.types()) if due else None
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("cannot list workers: %s", exc)
            self.summary.setText("cannot list workers")
            return
        finally:
            self._refreshing = False
        self._served = view.served
        self.model.set_workers(view.workers)
        if view.unserved is not None:
            self._unserved_at = time.monotonic()
            self._show_unserved(view.unserved)
        if uses is not None:
            self.limits.show_uses(uses)
        if types is not None:
            self.types.show_types(types)
        self._update_summary()
        self.update_buttons()
        self.workers_loaded.emit(view.workers)

    def _reread_limits(self) -> None:
        if self.connection.is_connected and not self._refreshing:
            spawn(self.refresh_limits(), "types-after-notify")

    async def refresh_limits(self) -> None:
        """Read the limits and the types now (a type was paused, resumed or limited)."""
        try:
            uses = await self.connection.run(lambda jobs: jobs.limits())
            types = await self.connection.run(lambda jobs: jobs.types())
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("cannot read the limits: %s", exc)
            return
        self.limits.show_uses(uses)
        self.types.show_types(types)

    def _show_unserved(self, unserved: list[UnservedType]) -> None:
        self.unserved = unserved
        for old in self._warning_labels:
            old.deleteLater()
        self._warning_labels = []
        lines = [f"⚠ no worker serves type <b>{html.escape(u.type)}</b> — {u.queued:,}{'+' if u.capped else ''} "
                 f"queued {'jobs wait' if u.queued != 1 else 'job waits'}" for u in unserved[:MAX_WARNINGS]]
        if len(unserved) > MAX_WARNINGS:
            rest = unserved[MAX_WARNINGS:]
            lines.append(f"⚠ and {len(rest)} more job types no worker serves: "
                         f"{html.escape(', '.join(u.type for u in rest))}")
        for text in lines:
            label = QLabel(text)
            label.setObjectName("unservedWarning")
            label.setTextFormat(Qt.TextFormat.RichText)
            label.setToolTip("Start a worker whose processors include this type, or cancel these jobs.")
            self.warning_layout.addWidget(label)
            self._warning_labels.append(label)
        self.warning_box.setVisible(bool(lines))

    def warnings(self) -> list[str]:
        """The warning strip as plain text, one line per entry."""
        if self.warning_box.isHidden():
            return []
        return [html.unescape(label.text().replace("<b>", "").replace("</b>", "")) for label in self._warning_labels]

    def _update_summary(self) -> None:
        workers = self.model.workers()
        lost = sum(1 for w in workers if self.model.is_lost(w))
        live = sum(1 for w in workers if w.state in fleet.LIVE_STATES and not self.model.is_lost(w))
        parts = [f"{live} live"]
        if lost:
            parts.append(f"⚠ {lost} lost")
        parts.append(f"{len(workers)} seen")
        self.summary.setText(" · ".join(parts))

    def _tick(self) -> None:
        self.model.tick()
        self._update_summary()
        self.update_buttons()

    # -- selection and commands -------------------------------------------------------------

    def selected_worker(self) -> WorkerRecord | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.row_at(rows[0].row()) if rows else None

    def select_worker(self, worker_id: str) -> bool:
        row = self.model.row_of(worker_id)
        if row is None:
            return False
        self.table.selectRow(row)
        return True

    def _selection_changed(self, *_: QItemSelection) -> None:
        self.update_buttons()

    def allowed(self, command: str) -> bool:
        worker = self.selected_worker()
        return (worker is not None and self.connection.is_connected and self.connection.writable and not self.busy
                and worker_command_is_legal(command, worker.state) and not self.model.is_lost(worker))

    def update_buttons(self) -> None:
        why = self.connection.read_only_reason if self.connection.is_connected else None
        for command, button in self.command_buttons.items():
            gate(button, self.allowed(command), why, COMMANDS[command][1])

    def _command_clicked(self, command: str) -> None:
        worker = self.selected_worker()
        if worker is None or not self.allowed(command):
            return
        question = QUESTIONS.get(command)
        if question is not None:
            text = question.format(id=worker.id, host=worker.host,
                                   timeout=self.connection.settings.JOB_SHUTDOWN_TIMEOUT)
            if QMessageBox.question(self, "jobdesk", text) != QMessageBox.StandardButton.Yes:
                return
        spawn(self.send(command, worker.id), f"worker-{command}")

    async def send(self, command: str, worker_id: str) -> bool:
        """Ask a worker to pause, resume, drain or stop (no dialogs); report the outcome."""
        self.busy = True
        self.update_buttons()
        try:
            record = await self.connection.act(lambda jobs: jobs.worker_command(worker_id, command))
        except JobdeskError as exc:
            self._show_error(str(exc))
            return False
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self._show_error(f"cannot {command} worker {worker_id}: {reason}")
            return False
        finally:
            self.busy = False
            self.update_buttons()
        self.error_label.hide()
        self.message.emit(f"asked worker {record.id} on {record.host} to {command}")
        # The worker acts on the NOTIFY at once; show its new state as soon as it reports it.
        QTimer.singleShot(300, self, lambda: spawn(self.refresh(), "workers-after-command"))
        return True

    def _show_error(self, text: str) -> None:
        self.error_label.setText(f"⚠ {text}")
        self.error_label.show()
        self.message.emit(text)

