"""What the dialogs that send a job's input share (New job…, Edit input and retry…): a JSON
editor checked as it is typed (JSON, an object, and the processor's `input_model` where the
console loaded it, naming the wrong field), the problems under it, the database's refusal, and
OK / Cancel. OK stays disabled while the input is wrong or a submission is under way; a refusal
is shown in the dialog, which stays open."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QWidget

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import attempt, reason
from jobdesk.console.jobs.input_models import check_input
from jobdesk.console.jobs.job_detail import monospace
from jobdesk.console.tasks import spawn

T = TypeVar("T")


def field_error() -> QLabel:
    """A label for a problem, styled as one, wrapping long messages."""
    label = QLabel()
    label.setObjectName("fieldError")
    label.setWordWrap(True)
    return label


class InputDialog(QDialog):
    """The editor (`input_edit`), its problems (`input_error`), the refusal (`submit_error`) and
    the buttons (`ok_button` says `ok_text`); a subclass lays them out, says which model checks
    the input and what else OK needs, and sends the input in `send`."""

    task_name = "input-dialog"  # the name of the task `send` runs in

    def __init__(self, connection: ConsoleConnection, text: str, ok_text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.connection = connection
        self._busy = False
        self.input_edit = QPlainTextEdit(text)
        self.input_edit.setFont(monospace())
        self.input_edit.textChanged.connect(self.validate)
        self.input_error = field_error()
        self.input_error.hide()
        self.submit_error = field_error()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText(ok_text)
        self.buttons.accepted.connect(self.submit)
        self.buttons.rejected.connect(self.reject)

    def input_model(self) -> type[BaseModel] | None:
        """The model the input is checked against; None checks it as a JSON object only."""
        return None

    def ready(self) -> bool:
        """Whether the dialog's other fields allow OK."""
        return True

    async def send(self, value: dict[str, Any]) -> object:
        """Send the checked input (through `act`)."""
        raise NotImplementedError

    def validate(self) -> dict[str, Any] | None:
        """Check what is typed; name the problems under the editor and enable OK only when fine."""
        value, problems = check_input(self.input_edit.toPlainText(), self.input_model())
        self.input_error.setText("\n".join(problems))
        self.input_error.setVisible(bool(problems))
        self.ok_button.setEnabled(self.ready() and value is not None and not self._busy)
        return value

    def submit(self) -> None:
        value = self.validate()
        if value is None or not self.ok_button.isEnabled():
            return
        spawn(self.send(value), self.task_name)

    async def act(self, call: Callable[[Any], Awaitable[T]], failed: str) -> T | None:
        """Run `call(service)` as an action, OK disabled meanwhile. A refusal is shown under the
        input as `failed: reason` and gives None."""
        self.submit_error.clear()
        return await attempt(self.connection.act(call), self._set_busy,
                             lambda exc: self.submit_error.setText(f"{failed}: {reason(exc)}"))

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.validate()  # OK follows
