"""Cancel, retry, retry from scratch, edit input and retry, approve and reject on the selected jobs,
through the same `worker.transitions` as the CLI. Each action is enabled only where it is legal for
every selected job (Edit input and retry: for one job). Pause type and Resume type act on the selected
jobs' one type (`type_actions`). The actions are the toolbar's, and the job tables' right-click menu
(`job_sharing.JobSharing.job_menu`) offers them all."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QInputDialog, QMessageBox, QWidget

from jobdesk.console.access import gate
from jobdesk.console.errors import attempt
from jobdesk.console.jobs.type_actions import (
    TYPE_ACTIONS,
    ask_reason,
    done_text,
    run_type_action,
    selected_type,
)
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import icon
from jobdesk.core.errors import JobdeskError
from jobdesk.core.models import Status
from jobdesk.core.rules import is_legal

# action name: (label, shortcut, confirmation question or None)
ACTIONS: dict[str, tuple[str, str, str | None]] = {
    "cancel": ("Cancel", "Ctrl+K", "Cancel {n} job(s)? Jobs that depend on them are cancelled too."),
    "retry": ("Retry", "Ctrl+R", None),
    "retry_fresh": ("Retry from scratch…", "Ctrl+Shift+R",
                    "Retry {n} job(s) from scratch? Their stored steps are forgotten, so every step runs again."),
    "edit_input": ("Edit input and retry…", "Ctrl+E", None),
    "approve": ("Approve", "Ctrl+Return", None),
    "reject": ("Reject…", "Ctrl+Shift+J", None),
}


TOOLTIPS = {"retry_fresh": "Retry the selected jobs from scratch, forgetting their stored steps",
            "edit_input": "Edit the selected job's input in a JSON editor and retry it with the new input"}

# The rule (jobdesk.core.rules) an action obeys, where its name is not one.
RULES = {"retry_fresh": "retry", "edit_input": "retry"}
SINGLE = frozenset({"edit_input"})  # actions on one job at a time


def action_is_legal(name: str, status: Status) -> bool:
    """Whether the action `name` of ACTIONS may be applied to a job of this status."""
    return is_legal(RULES.get(name, name), status)


class Selected(Protocol):
    """Anything an action can apply to: a job table row, a DAG node."""

    id: str
    status: Status


class JobActions(QObject):
    """Owns the QActions and runs them; reports results as messages."""

    message = Signal(str)  # a result for the status bar
    error = Signal(str)  # a refusal or a failure, for an error box
    done = Signal(list)  # ids changed
    edit_requested = Signal(str)  # Edit input and retry… on this job: its dialog opens (`JobSharing`)
    type_changed = Signal(object)  # a TypeControl: a type was paused or resumed

    def __init__(self, parent: QWidget, run: Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[Any]]) -> None:
        super().__init__(parent)
        self._parent = parent
        self._run = run
        self.selection: list[Selected] = []
        self.read_only = False
        self.read_only_reason: str | None = None  # why the console cannot act, for the tooltips
        self.tips: dict[str, str] = {}  # each action's own tooltip
        self.connected = False
        self.busy = False
        self.actions: dict[str, QAction] = {}
        for name, (label, shortcut, _) in ACTIONS.items():
            action = QAction(icon(RULES.get(name, name)), label, parent)
            action.setShortcut(QKeySequence(shortcut))
            self.tips[name] = TOOLTIPS.get(name, f"{label.rstrip('…')} the selected jobs") + f" ({shortcut})"
            action.triggered.connect(lambda _checked=False, n=name: self.trigger(n))
            self.actions[name] = action
        for name, (label, tip) in TYPE_ACTIONS.items():
            action = QAction(label, parent)
            self.tips[name] = tip
            action.triggered.connect(lambda _checked=False, n=name: self.trigger(n))
            self.actions[name] = action
        self.update_enabled()

    def set_selection(self, rows: Sequence[Selected]) -> None:
        self.selection = list(rows)
        self.update_enabled()

    def set_read_only(self, reason: str | None) -> None:
        """Read-only for `reason` (the actions stay in sight, disabled, their tooltips say why),
        or writable again with None."""
        self.read_only = reason is not None
        self.read_only_reason = reason
        self.update_enabled()

    def set_connected(self, connected: bool) -> None:
        self.connected = connected
        self.update_enabled()

    def legal(self, name: str, rows: Sequence[Selected] | None = None) -> bool:
        rows = self.selection if rows is None else rows
        if name in SINGLE and len(rows) != 1:
            return False
        if name in TYPE_ACTIONS:
            return self.can_act() and selected_type(rows) is not None
        return self.can_act() and bool(rows) and all(action_is_legal(name, row.status) for row in rows)

    def can_act(self) -> bool:
        """Connected, writable and idle: whether any action may start now."""
        return self.connected and not self.read_only and not self.busy

    def update_enabled(self) -> None:
        for name, action in self.actions.items():
            gate(action, self.legal(name), self.read_only_reason, self.tips[name])

    def trigger(self, name: str, rows: Sequence[Selected] | None = None) -> None:
        """Ask what needs asking, then run `name` on `rows` (the table's selection by default).
        Rows need an `id` and a `status`."""
        rows = self.selection if rows is None else rows
        if not self.legal(name, rows):
            return
        if name in TYPE_ACTIONS:
            self.trigger_type(name, selected_type(rows) or "")
            return
        ids = [row.id for row in rows]
        if name == "edit_input":
            self.edit_requested.emit(ids[0])
            return
        reason = None
        question = ACTIONS[name][2]
        if question is not None:
            answer = QMessageBox.question(self._parent, "jobdesk", question.format(n=len(ids)))
            if answer != QMessageBox.StandardButton.Yes:
                return
        if name == "reject":
            reason, ok = QInputDialog.getText(self._parent, "Reject", f"Why reject {len(ids)} job(s)?")
            if not ok or not reason.strip():
                return
        spawn(self.perform(name, ids, reason), f"action-{name}")

    def trigger_type(self, name: str, job_type: str) -> None:
        """Pause (asking why, optionally) or resume `job_type`."""
        reason = None
        if name == "pause_type":
            reason = ask_reason(self._parent, job_type)
            if reason is None:
                return
        spawn(self.perform_type(name, job_type, reason), f"action-{name}")

    async def perform_type(self, name: str, job_type: str, reason: str | None = None) -> bool:
        """Pause or resume a type (no dialogs); report how it went. True when done."""
        record = await attempt(run_type_action(self._run, name, job_type, reason), self._set_busy,
                               self._refused(TYPE_ACTIONS[name][0].rstrip("…")))
        if record is None:
            return False
        self.message.emit(done_text(record))
        self.type_changed.emit(record)
        return True

    async def perform(self, name: str, ids: list[str], reason: str | None = None) -> list[str]:
        """Run an action (no dialogs); returns the ids changed, or [] after reporting an error."""
        label = ACTIONS[name][0].rstrip("…")
        if name == "reject":
            return await self.run_operation(label, lambda c: c.reject(ids, reason or ""))
        if name == "retry_fresh":
            return await self.run_operation(label, lambda c: c.retry(ids, fresh=True))
        return await self.run_operation(label, lambda c: getattr(c, name)(ids))

    async def run_operation(self, label: str, call: Callable[[Any], Awaitable[list[str]]]) -> list[str]:
        """Run `call(client)`, which changes jobs and returns their ids; report how it went."""
        changed = await attempt(self._run(call), self._set_busy, self._refused(label))
        if changed is None:
            return []
        changed_ids = list(changed)
        self.message.emit(f"{label}: {len(changed_ids)} job(s)")
        self.done.emit(changed_ids)
        return changed_ids

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.update_enabled()

    def _refused(self, label: str) -> Callable[[BaseException], None]:
        """Report an action's expected failure: a JobdeskError says what was wrong by itself;
        a database error is prefixed with the action's label."""
        return lambda exc: self.error.emit(str(exc) if isinstance(exc, JobdeskError) else f"{label} failed: {exc}")
