"""New job… (Ctrl+N): submit one job through `JobService.enqueue`.

The type is an editable list of the types live workers serve; the input is JSON, checked as it
is typed (and against the processor's `input_model` where it declares one, whose skeleton is
prefilled); dependencies, a pipeline and a priority are optional. OK stays disabled while the
input is wrong, and a refusal from the database is shown in the dialog, which stays open
(`input_dialog.InputDialog`)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QLabel, QLineEdit, QSpinBox, QVBoxLayout, QWidget

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.jobs.input_dialog import InputDialog
from jobdesk.console.jobs.input_models import skeleton
from jobdesk.core.models import short_id


class NewJobDialog(InputDialog):
    submitted = Signal(str)  # the new job's id
    task_name = "new-job"

    def __init__(self, connection: ConsoleConnection, models: dict[str, type[BaseModel]],
                 parent: QWidget | None = None) -> None:
        super().__init__(connection, "{}", "Submit", parent)
        self.setWindowTitle("New job")
        self.resize(560, 520)
        self.models = models
        self.job_id: str | None = None
        self._prefilled = "{}"  # the skeleton last put in, replaced when the type changes
        self._build_fields()
        self._build_layout()
        self.type_combo.setCurrentText("")
        self.validate()

    def _build_fields(self) -> None:
        """Type (with a note under it), dependencies, pipeline and priority; the input's fields
        are `InputDialog`'s."""
        self.type_combo = QComboBox()
        self.type_combo.setEditable(True)
        self.type_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        line = self.type_combo.lineEdit()
        assert line is not None  # the combo is editable
        line.setPlaceholderText("a job type, e.g. echo")
        self.type_combo.currentTextChanged.connect(self._type_changed)
        self.type_note = QLabel()
        self.type_note.setObjectName("hint")
        self.type_note.hide()
        self.depends_edit = QLineEdit()
        self.depends_edit.setPlaceholderText("job ids, separated by commas or spaces (optional)")
        self.pipeline_edit = QLineEdit()
        self.pipeline_edit.setPlaceholderText("optional")
        self.priority = QSpinBox()
        self.priority.setRange(-1_000_000, 1_000_000)
        self.priority.setToolTip("Higher runs first")

    def _build_layout(self) -> None:
        """The form, the refusal under it, and Submit / Cancel."""
        type_box, input_box = QVBoxLayout(), QVBoxLayout()  # the notes show under their field when set
        type_box.addWidget(self.type_combo)
        type_box.addWidget(self.type_note)
        input_box.addWidget(self.input_edit, 1)
        input_box.addWidget(self.input_error)
        form = QFormLayout()
        form.addRow("Type", type_box)
        form.addRow("Input", input_box)
        form.addRow("Depends on", self.depends_edit)
        form.addRow("Pipeline", self.pipeline_edit)
        form.addRow("Priority", self.priority)
        layout = QVBoxLayout(self)
        layout.addLayout(form, 1)
        layout.addWidget(self.submit_error)
        layout.addWidget(self.buttons)

    # -- types ------------------------------------------------------------------------------

    async def load_types(self, lease_timeout_s: float) -> None:
        """Offer the types live workers serve; any other type can be typed in."""
        try:
            view = await self.connection.run(lambda jobs: jobs.workers_view(lease_timeout_s))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self._note(f"cannot list the types workers serve: {reason(exc)}")
            return
        self.set_types(sorted(view.served))
        if not view.served:
            self._note("no live worker serves any type yet; a job waits until one does")

    def _note(self, text: str) -> None:
        self.type_note.setText(text)
        self.type_note.setVisible(bool(text))

    def set_types(self, types: list[str]) -> None:
        typed = self.type_combo.currentText()
        self.type_combo.blockSignals(True)
        self.type_combo.clear()
        self.type_combo.addItems(types)
        self.type_combo.setCurrentText(typed)
        self.type_combo.blockSignals(False)

    def _type_changed(self, job_type: str) -> None:
        model = self.models.get(job_type.strip())
        current = self.input_edit.toPlainText().strip()
        if current in ("", "{}", self._prefilled.strip()):
            self._prefilled = json.dumps(skeleton(model), indent=2) if model else "{}"
            self.input_edit.setPlainText(self._prefilled)
        self._note(f"input checked against {model.__name__}" if model else "")
        self.validate()

    # -- checking and submitting ------------------------------------------------------------

    def dependencies(self) -> list[str]:
        return [d for d in re.split(r"[\s,]+", self.depends_edit.text()) if d]

    def input_model(self) -> type[BaseModel] | None:
        return self.models.get(self.type_combo.currentText().strip())

    def ready(self) -> bool:
        return bool(self.type_combo.currentText().strip())

    async def send(self, value: dict[str, Any]) -> None:
        job_type = self.type_combo.currentText().strip()
        deps, pipeline, priority = self.dependencies(), self.pipeline_edit.text().strip() or None, self.priority.value()
        job_id = await self.act(lambda jobs: jobs.enqueue(job_type, value, depends_on=deps, pipeline_id=pipeline,
                                                          priority=priority), "not submitted")
        if job_id is None:
            return
        self.job_id = job_id
        self.submitted.emit(job_id)
        self.setWindowTitle(f"New job — submitted {short_id(job_id)}")
        self.accept()
