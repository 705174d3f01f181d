"""Processors for the durable processors' benchmark (benchmarks/durable_bench.py): ten trivial
steps, the same ten calls without steps, a no-op, a long sleep and a wait for an event.

`BENCH_STEPS=N` sets how many steps (and calls) the first two make; 10 when unset.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from jobdesk import BaseProcessor, Job, ProcessorResult

STEPS = int(os.environ.get("BENCH_STEPS", "10"))


def trivial(i: int) -> int:
    return i + 1


class Steps(BaseProcessor):
    """STEPS steps, each a trivial function: what the steps themselves cost."""

    async def process(self, job: Job) -> ProcessorResult:
        total = 0
        for i in range(STEPS):
            value = await job.step(f"s{i}", trivial, i)
            total += value if isinstance(value, int) else 0
        return ProcessorResult({"total": total})


class Plain(BaseProcessor):
    """The same work as `Steps`, without steps."""

    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({"total": sum(trivial(i) for i in range(STEPS))})


class Noop(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({})


class Sleeper(BaseProcessor):
    """Sleeps, then returns when it woke, to compare with the wake time its sleep stored."""

    async def process(self, job: Job) -> ProcessorResult:
        await job.sleep(job.input_data["seconds"])
        return ProcessorResult({"woke": datetime.now(UTC).isoformat()})


class Waiter(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        payload = await job.wait_for_event(job.input_data["key"])
        return ProcessorResult({"payload": payload})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {
    "bench.steps": Steps, "bench.plain": Plain, "bench.noop": Noop, "bench.sleep": Sleeper, "bench.wait": Waiter}
