"""Pause type and Resume type: a job type paused across the fleet (its jobs stay queued, every
worker stops claiming it) or resumed, through the service as `jobdesk types pause|resume`.
The job actions offer them on the selected job's type (toolbar and the job table's context
menu), the Limits view on the selected type; both ask here, and run here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from PySide6.QtWidgets import QInputDialog, QLineEdit, QWidget

from jobdesk.core.type_controls import TypeControl

# action name: (label, tooltip)
TYPE_ACTIONS: dict[str, tuple[str, str]] = {
    "pause_type": ("Pause type…", "Pause the selected job's type across the fleet: its jobs stay queued, "
                                  "every worker stops claiming it, running jobs finish"),
    "resume_type": ("Resume type", "Resume the selected job's type: workers claim its jobs again at once"),
}

Run = Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


def selected_type(rows: Sequence[object]) -> str | None:
    """The one type of the selected jobs; None when there are none or several."""
    types = {getattr(row, "type", None) for row in rows}
    return next(iter(types)) if len(types) == 1 and None not in types else None


def ask_reason(parent: QWidget, job_type: str) -> str | None:
    """Ask why the type is paused (optional); None when the user cancels."""
    reason, ok = QInputDialog.getText(parent, "Pause type",
                                      f"Pause {job_type} across the fleet? Its jobs stay queued and every "
                                      "worker stops claiming it; running jobs finish.\n\nReason (optional):",
                                      QLineEdit.EchoMode.Normal, "")
    return reason if ok else None


async def run_type_action(run: Run, name: str, job_type: str, reason: str | None = None) -> TypeControl:
    """Pause or resume `job_type` through `run(call)` (the connection's act). Raises what the
    service raises (InvalidJob for a bad name: nothing is written)."""
    if name == "pause_type":
        result: TypeControl = await run(lambda jobs: jobs.pause_type(job_type, reason))
    else:
        result = await run(lambda jobs: jobs.resume_type(job_type))
    return result


def done_text(record: TypeControl) -> str:
    """What the status bar says after the action."""
    if record.paused:
        why = f" ({record.reason})" if record.reason else ""
        return f"Paused type {record.type} across the fleet{why}"
    return f"Resumed type {record.type}: workers claim it again"
