"""Processors for the benchmarks: a no-op, and one that stamps the moment it starts.

`BENCH_TYPES=N` also serves N - 1 more no-op types, `bench.extra.1` ... (a worker of many types).
"""

from __future__ import annotations

import os
import time

from jobdesk import BaseProcessor, Job, ProcessorResult


class Noop(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({})


class Stamp(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({"t": time.time()})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {"bench.noop": Noop, "bench.stamp": Stamp}
PROCESSOR_MAP.update({f"bench.extra.{i}": Noop for i in range(1, int(os.environ.get("BENCH_TYPES", "1")))})
