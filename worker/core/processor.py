"""The processor API: subclass BaseProcessor and map job types to it in PROCESSOR_MAP."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from jobdesk.core.models import Job, ProcessorResult


class BaseProcessor:
    """Runs one type of job. Instantiated with no arguments, once per worker.

    `input_model`, a pydantic model, declares what `input_data` must look like: the worker checks
    it before `process` (a mismatch fails the job at once, without retries), and `jobdesk submit`
    and the HTTP API check it at enqueue time when they have the processor loaded.

    `output_model`, a pydantic model, declares what `result_data` must look like: the worker
    checks it after `process` returns, and a mismatch is a failed attempt, retried as any error
    (a bug that a new version of the processor may fix). A backend reads the result back typed
    with `JobRecord.result(model)`.
    """

    input_model: ClassVar[type[BaseModel] | None] = None
    output_model: ClassVar[type[BaseModel] | None] = None

    async def process(self, job: Job) -> ProcessorResult:
        raise NotImplementedError(f"{type(self).__name__}.process is not implemented")
