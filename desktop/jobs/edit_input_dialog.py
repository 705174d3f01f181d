"""Edit input and retry…: a failed or cancelled job's input in a JSON editor, retried with what
is typed through `JobService.retry_with_input` (the change of input and the retry are one
transaction; the old input stays in the audit log).

The input is checked as it is typed: JSON, an object, and the processor's `input_model` where
the console loaded it, naming the wrong field. "Retry with this input" stays disabled while the
input is wrong; a refusal from the database is shown in the dialog, which stays open
(`input_dialog.InputDialog`)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.jobs.input_dialog import InputDialog
from jobdesk.core.models import JobRecord, short_id


class EditInputDialog(InputDialog):
    retried = Signal(str)  # the job's id, queued again with the new input
    task_name = "edit-input-retry"

    def __init__(self, connection: ConsoleConnection, job: JobRecord, model: type[BaseModel] | None,
                 parent: QWidget | None = None) -> None:
        super().__init__(connection, json.dumps(job.input_data, indent=2, ensure_ascii=False),
                         "Retry with this input", parent)
        self.setWindowTitle(f"Edit input and retry — {job.type} {short_id(job.id)}")
        self.resize(560, 460)
        self.job = job
        self.model = model
        self.note = QLabel(f"Job {job.id} is {job.status}. It runs again with this input; its old input "
                           f"is kept in the audit log.")
        self.note.setWordWrap(True)
        self.model_note = QLabel(f"input checked against {model.__name__}" if model
                                 else "no input model loaded for this type: the input is checked as JSON only")
        self.model_note.setObjectName("hint")
        layout = QVBoxLayout(self)
        for widget in (self.note, self.model_note):
            layout.addWidget(widget)
        layout.addWidget(self.input_edit, 1)
        layout.addWidget(self.input_error)
        layout.addWidget(self.submit_error)
        layout.addWidget(self.buttons)
        self.validate()

    def input_model(self) -> type[BaseModel] | None:
        return self.model

    async def send(self, value: dict[str, Any]) -> bool:
        """Retry the job with `value`; True when it was queued again (the dialog then closes)."""
        job_id = self.job.id
        if await self.act(lambda jobs: jobs.retry_with_input(job_id, value), "not retried") is None:
            return False
        self.retried.emit(job_id)
        self.accept()
        return True
