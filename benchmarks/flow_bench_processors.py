"""Processors of the flow-control benchmark: no-op types, and `bench.slow`, which takes
BENCH_SLOW_S seconds (default 0.05)."""

from __future__ import annotations

import asyncio
import os

from jobdesk import BaseProcessor, Job, ProcessorResult


class Noop(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({})


class Slow(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        await asyncio.sleep(float(os.environ.get("BENCH_SLOW_S", "0.05")))
        return ProcessorResult({})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {"bench.noop": Noop, "bench.flow": Noop, "bench.slow": Slow}
