"""Edit input and retry…: a failed or cancelled job's input in a JSON editor, retried with what
is typed through `JobService.retry_with_input` (the change of input and the retry are one
transaction; the old input stays in the audit log).

The input is checked as it is typed: JSON, an object, and the processor's `input_model` where
the console loaded it, naming the wrong field. "Retry with this input" stays disabled while the
input is wrong; a refusal from the database is shown in the dialog, which stays open."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.jobs.input_models import check_input
from jobdesk.console.jobs.job_detail import monospace
from jobdesk.console.tasks import spawn
from jobdesk.core.models import JobRecord, short_id


class EditInputDialog(QDialog):
    retried = Signal(str)  # the job's id, queued again with the new input

    def __init__(self, connection: ConsoleConnection, job: JobRecord, model: type[BaseModel] | None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Edit input and retry — {job.type} {short_id(job.id)}")
        self.resize(560, 460)
        self.connection = connection
        self.job = job
        self.model = model
        self._busy = False
        self.note = QLabel(f"Job {job.id} is {job.status}. It runs again with this input; its old input "
                           f"is kept in the audit log.")
        self.note.setWordWrap(True)
        self.model_note = QLabel(f"input checked against {model.__name__}" if model
                                 else "no input model loaded for this type: the input is checked as JSON only")
        self.model_note.setObjectName("hint")
        self.input_edit = QPlainTextEdit(json.dumps(job.input_data, indent=2, ensure_ascii=False))
        self.input_edit.setFont(monospace())
        self.input_edit.textChanged.connect(self.validate)
        self.input_error = QLabel()
        self.input_error.setObjectName("fieldError")
        self.input_error.setWordWrap(True)
        self.input_error.hide()
        self.submit_error = QLabel()
        self.submit_error.setObjectName("fieldError")
        self.submit_error.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Retry with this input")
        self.buttons.accepted.connect(self.submit)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        for widget in (self.note, self.model_note):
            layout.addWidget(widget)
        layout.addWidget(self.input_edit, 1)
        layout.addWidget(self.input_error)
        layout.addWidget(self.submit_error)
        layout.addWidget(self.buttons)
        self.validate()

    def validate(self) -> dict[str, Any] | None:
        """Check what is typed; name the problems under the editor and enable OK only when fine."""
        value, problems = check_input(self.input_edit.toPlainText(), self.model)
        self.input_error.setText("\n".join(problems))
        self.input_error.setVisible(bool(problems))
        self.ok_button.setEnabled(value is not None and not self._busy)
        return value

    def submit(self) -> None:
        value = self.validate()
        if value is None or not self.ok_button.isEnabled():
            return
        spawn(self.retry_with(value), "edit-input-retry")

    async def retry_with(self, value: dict[str, Any]) -> bool:
        """Retry the job with `value`; True when it was queued again (the dialog then closes)."""
        job_id = self.job.id
        self._busy = True
        self.ok_button.setEnabled(False)
        self.submit_error.clear()
        try:
            await self.connection.act(lambda jobs: jobs.retry_with_input(job_id, value))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.submit_error.setText(f"not retried: {reason(exc)}")
            return False
        finally:
            self._busy = False
            self.validate()
        self.retried.emit(job_id)
        self.accept()
        return True
