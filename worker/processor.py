"""The processor API: subclass BaseProcessor and map job types to it in PROCESSOR_MAP."""

from __future__ import annotations

from worker.models import Job, ProcessorResult


class BaseProcessor:
    """Runs one type of job. Instantiated with no arguments, once per worker."""

    async def process(self, job: Job) -> ProcessorResult:
        raise NotImplementedError(f"{type(self).__name__}.process is not implemented")
