"""General-purpose job types: echo, sleep and noop."""

from __future__ import annotations

import asyncio

from worker.errors import PermanentJobError
from worker.models import Job, ProcessorResult
from worker.processor import BaseProcessor


class EchoProcessor(BaseProcessor):
    """The result is the input."""

    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult(result_data=dict(job.input_data))


class SleepProcessor(BaseProcessor):
    """Waits `{"seconds": x}`; cancellable at any moment."""

    async def process(self, job: Job) -> ProcessorResult:
        seconds = job.input_data.get("seconds", 1)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise PermanentJobError(f"sleep needs a number of seconds >= 0, got {seconds!r}")
        await asyncio.sleep(seconds)
        return ProcessorResult(result_data={"slept": seconds})


class NoopProcessor(BaseProcessor):
    """Does nothing; for benchmarks and smoke tests."""

    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult(result_data={})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {
    "echo": EchoProcessor,
    "sleep": SleepProcessor,
    "noop": NoopProcessor,
}
