"""Processors that report progress and log lines, for the tests of the doors that read them
(loaded in-process, and by workers run as `jobdesk worker --processors report_processors`)."""

from __future__ import annotations

import asyncio
import logging
import time

from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor

log = logging.getLogger("report.steps")


class Steps(BaseProcessor):
    """`{"steps": N, "every": S}`: N steps S seconds apart, each logged and reported."""

    async def process(self, job: Job) -> ProcessorResult:
        steps, every = int(job.input_data.get("steps", 5)), float(job.input_data.get("every", 0.2))
        for i in range(1, steps + 1):
            await asyncio.sleep(every)
            log.info("step %d of %d", i, steps)
            await job.progress(i / steps, f"step {i} of {steps}")
        return ProcessorResult({"steps": steps})


class Holds(BaseProcessor):
    """Reports 0.4 and a line, then holds until `release` is set (in-process tests only)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def process(self, job: Job) -> ProcessorResult:
        await job.progress(0.4, "rendered 40 of 100 frames")
        job.log("rendering")
        await self.release.wait()
        return ProcessorResult({})


class SyncSteps(BaseProcessor):
    """The same as Steps from a thread, without await (as a plain-def processor reports)."""

    async def process(self, job: Job) -> ProcessorResult:
        def work() -> None:
            for i in range(1, 6):
                time.sleep(0.05)
                job.progress(i / 5, f"sync step {i}")
                logging.getLogger("report.sync").info("sync step %d", i)

        await asyncio.to_thread(work)
        return ProcessorResult({})


PROCESSOR_MAP = {"report.steps": Steps, "report.sync": SyncSteps}
