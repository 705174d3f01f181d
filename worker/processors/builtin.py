"""General-purpose job types: echo, sleep and noop."""

from __future__ import annotations

import asyncio

from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.processors.model_later import ModelLater

MODELS = "jobdesk.processors.models"  # EchoInput, SleepInput, NoopInput: loaded at the first job


class EchoProcessor(BaseProcessor):
    """The result is the input."""

    input_model = ModelLater(MODELS, "EchoInput")  # type: ignore[assignment]

    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult(result_data=dict(job.input_data))


SLEEP_PROGRESS_FROM_S = 2.0


class SleepProcessor(BaseProcessor):
    """Waits `{"seconds": x}`; cancellable at any moment. A sleep of PROGRESS_FROM_S or more
    reports its progress every second (shorter ones would only add a write)."""

    input_model = ModelLater(MODELS, "SleepInput")  # type: ignore[assignment]

    async def process(self, job: Job) -> ProcessorResult:
        seconds = float(job.input_data.get("seconds", 1))  # checked by the worker against SleepInput already
        if seconds < SLEEP_PROGRESS_FROM_S:
            await asyncio.sleep(seconds)
            return ProcessorResult(result_data={"slept": seconds})
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while (left := end - loop.time()) > 0:
            await asyncio.sleep(min(left, 1.0))
            slept = seconds - max(0.0, end - loop.time())
            await job.progress(min(1.0, slept / seconds), f"slept {slept:.0f} of {seconds:g} s")
        return ProcessorResult(result_data={"slept": seconds})


class NoopProcessor(BaseProcessor):
    """Does nothing; for benchmarks and smoke tests."""

    input_model = ModelLater(MODELS, "NoopInput")  # type: ignore[assignment]

    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult(result_data={})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {
    "echo": EchoProcessor,
    "sleep": SleepProcessor,
    "noop": NoopProcessor,
}
