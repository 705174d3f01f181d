"""What a processor returns, checked before it is stored: a `ProcessorResult` whose data and next
jobs PostgreSQL can store, and whose data fits the processor's `output_model`. A result that does
not is the processor's own mistake (`InvalidResult`): its job fails at once, without retries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdesk.core.errors import InvalidJob, PermanentJobError
from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.store import transitions

if TYPE_CHECKING:
    from pydantic import BaseModel


class InvalidResult(PermanentJobError):
    """A processor returned something the engine cannot store, or a result its `output_model`
    refuses: the processor's own mistake, which no retry can mend, so the job fails at once."""


def check_result(job: Job, result: object) -> ProcessorResult:
    if not isinstance(result, ProcessorResult):
        raise InvalidResult(f"processor for {job.type!r} returned {type(result).__name__}, "
                            f"not ProcessorResult")
    if not isinstance(result.result_data, dict):
        raise InvalidResult("result_data must be a dict")
    try:
        transitions.json_text(result.result_data, "result_data")
    except InvalidJob as exc:
        raise InvalidResult(str(exc)) from None
    for child in result.next_jobs:
        if not isinstance(child, JobCreate):
            raise InvalidResult("next_jobs must hold JobCreate objects")
        try:
            transitions.json_text(child.input_data, f"input_data of next job {child.type!r}")
        except InvalidJob as exc:
            raise InvalidResult(str(exc)) from None
    return result


def check_output(model: type[BaseModel], result: ProcessorResult) -> None:
    """Raise InvalidResult, naming each field refused, unless `result_data` fits the processor's
    `output_model`: the job fails at once, without retries (see InvalidResult)."""
    from pydantic import ValidationError  # loaded by the model already; a worker starts without it

    try:
        model.model_validate(result.result_data)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(str(part) for part in err['loc']) or '(root)'}: {err['msg']}"
                           for err in exc.errors())
        raise InvalidResult(f"result_data does not match {model.__name__}: {fields}") from None
