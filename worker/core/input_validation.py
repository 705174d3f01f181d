"""Typed processor inputs: `input_data` checked against a processor's `input_model`.

One check for every door: the worker before `process`, `jobdesk submit` and the HTTP API at
enqueue time. A mismatch names each field by its path, like `input_data.seconds`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jobdesk.core.errors import InvalidJob, PermanentJobError
from jobdesk.core.models import Job
from jobdesk.core.processor import AnyProcessor

if TYPE_CHECKING:
    from pydantic import BaseModel

Validator = Callable[[str, dict[str, Any]], None]


class InvalidInput(InvalidJob):
    """`input_data` does not match the processor's `input_model`; `fields` holds (path, message)."""

    def __init__(self, job_type: str, fields: list[tuple[str, str]]) -> None:
        self.job_type = job_type
        self.fields = fields
        super().__init__(f"invalid input_data for {job_type}: "
                         + "; ".join(f"{path}: {message}" for path, message in fields))


def _path(loc: tuple[int | str, ...]) -> str:
    path = "input_data"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def field_errors(model: type[BaseModel], input_data: object) -> list[tuple[str, str]]:
    """(path, message) for each field of `input_data` that `model` refuses; [] if it fits."""
    from pydantic import ValidationError  # loaded by the model already; a worker starts without it

    try:
        model.model_validate(input_data)
    except ValidationError as exc:
        out = []
        for err in exc.errors():
            message = err["msg"]
            if err["type"] != "missing" and err["loc"]:
                message += f" (got {_shown(err.get('input'))})"
            out.append((_path(tuple(err["loc"])), message))
        return out
    return []


def validate_input(job_type: str, input_data: dict[str, Any],
                   processor: type[AnyProcessor] | AnyProcessor) -> None:
    """Raise InvalidInput unless `input_data` fits the processor's `input_model` (if it has one)."""
    model = processor.input_model
    if model is None:
        return
    errors = field_errors(model, input_data)
    if errors:
        raise InvalidInput(job_type, errors)


def make_validator(processors: Mapping[str, type[AnyProcessor] | AnyProcessor]) -> Validator:
    """`validate(type, input_data)` for the loaded processors: raises InvalidInput on a mismatch;
    a type without a loaded processor, or without an `input_model`, passes unchecked."""
    known = dict(processors)

    def validate(job_type: str, input_data: dict[str, Any]) -> None:
        processor = known.get(job_type)
        if processor is not None:
            validate_input(job_type, input_data, processor)

    return validate


def check_job_input(processor: AnyProcessor, job: Job) -> None:
    """The worker's check before `process`: a mismatch is a PermanentJobError (no retries)."""
    try:
        validate_input(job.type, job.input_data, processor)
    except InvalidInput as exc:
        raise PermanentJobError(str(exc)) from None
