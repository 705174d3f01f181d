"""Processors for the benchmarks: a no-op, and one that stamps the moment it starts."""

from __future__ import annotations

import time

from worker import BaseProcessor, Job, ProcessorResult


class Noop(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({})


class Stamp(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({"t": time.time()})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {"bench.noop": Noop, "bench.stamp": Stamp}
