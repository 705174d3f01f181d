"""Processors of the flow-control tests, loaded by worker processes with `--processors flow_processors`."""

from __future__ import annotations

import asyncio

from jobdesk import BaseProcessor, Job, ProcessorResult


class Nap(BaseProcessor):
    """Sleeps input_data["seconds"] (default 0), then succeeds."""

    async def process(self, job: Job) -> ProcessorResult:
        await asyncio.sleep(float(job.input_data.get("seconds", 0)))
        return ProcessorResult({})


class Echo(BaseProcessor):
    """Gives its input back as its result."""

    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult(dict(job.input_data))


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {name: Nap for name in ("flow.rate", "flow.user", "flow.fair",
                                                                       "flow.free", "flow.urate")}
PROCESSOR_MAP["flow.echo"] = Echo
