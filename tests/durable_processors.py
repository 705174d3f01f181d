"""Processors that use durable steps, sleeps, events and child jobs, for the tests of durable
processors (in-process workers, and worker processes via JOB_PROCESSOR_MODULES)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from jobdesk import BaseProcessor, EventTimeout, Job, JobCreate, JobWaitTimeout, PermanentJobError, ProcessorResult


async def count_call(dsn: str, job_id: str, step: str) -> None:
    """Note one call of a step's function in `step_calls`, a table the tests create."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("INSERT INTO step_calls (job_id, step) VALUES ($1, $2)", job_id, step)
    finally:
        await conn.close()


class ThreeSteps(BaseProcessor):
    """Three steps; the second takes `step2_s` seconds, long enough to kill its worker then."""

    async def process(self, job: Job) -> ProcessorResult:
        dsn = job.input_data["dsn"]

        async def one() -> int:
            await count_call(dsn, job.id, "one")
            return 1

        async def two() -> dict[str, Any]:
            await count_call(dsn, job.id, "two")
            await asyncio.sleep(job.input_data.get("step2_s", 0))
            return {"two": 2}

        def three(a: Any, b: Any) -> list[Any]:
            return [a, b, 3]

        a = await job.step("one", one)
        b = await job.step("two", two)
        await count_call(dsn, job.id, "three")
        c = await job.step("three", three, a, b)
        return ProcessorResult({"steps": c})


class Sleeper(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        await job.sleep(job.input_data["seconds"])
        return ProcessorResult({"slept": job.input_data["seconds"]})


class Waiter(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        try:
            payload = await job.wait_for_event(job.input_data["key"], timeout=job.input_data.get("timeout"))
        except EventTimeout:
            return ProcessorResult({"timed_out": True})
        return ProcessorResult({"payload": payload})


class Parent(BaseProcessor):
    """Spawns three children, the second of which fails, and waits for all of them."""

    async def process(self, job: Job) -> ProcessorResult:
        ids = await job.spawn([JobCreate("durable.child", {"fail": i == 1, "n": i}) for i in range(3)])
        records = await job.wait_for_jobs(ids, timeout=job.input_data.get("timeout"))
        return ProcessorResult({"children": ids, "statuses": [str(r.status) for r in records]})


class Child(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        await asyncio.sleep(job.input_data.get("seconds", 0.05))
        if job.input_data.get("fail"):
            raise PermanentJobError("child failed on purpose")
        return ProcessorResult({"n": job.input_data["n"]})


class WaitForOthers(BaseProcessor):
    """Waits for jobs it did not spawn (their ids in its input)."""

    async def process(self, job: Job) -> ProcessorResult:
        records = await job.wait_for_jobs(job.input_data["ids"])
        return ProcessorResult({"statuses": [str(r.status) for r in records]})


class SameNameTwice(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        await job.step("a", lambda: 1)
        await job.step("a", lambda: 2)
        return ProcessorResult({})


class StepsThenApproval(BaseProcessor):
    """A step, a sleep and a wait for the event `checked:<job id>`, then approval."""

    async def process(self, job: Job) -> ProcessorResult:
        made = await job.step("make", lambda: {"draft": 1})
        await job.sleep(0.2)
        checked = await job.wait_for_event(f"checked:{job.id}")
        return ProcessorResult({"made": made, "checked": checked}, requires_approval=True)


class StepFailsOnce(BaseProcessor):
    """Step "two" raises on the job's first attempt; the retry runs it again, not step "one"."""

    async def process(self, job: Job) -> ProcessorResult:
        dsn = job.input_data["dsn"]

        async def one() -> str:
            await count_call(dsn, job.id, "one")
            return "a"

        async def two() -> str:
            await count_call(dsn, job.id, "two")
            if job.attempt == 1:
                raise RuntimeError("step two fails on the first attempt")
            return "b"

        got = [await job.step("one", one), await job.step("two", two)]
        return ProcessorResult({"got": got})


class TimedWaits(BaseProcessor):
    """A sleep of a timedelta, a sleep until a datetime, a wait for an event with a timedelta
    timeout that runs out, then the event emitted and a sleep: the rerun must time out again."""

    async def process(self, job: Job) -> ProcessorResult:
        await job.sleep(timedelta(seconds=0.3))
        await job.sleep_until(datetime.now(UTC) + timedelta(seconds=0.3))
        try:
            await job.wait_for_event(job.input_data["key"], timeout=timedelta(seconds=0.3))
        except EventTimeout as exc:
            # The event comes too late: on the rerun after this sleep, the wait is still timed out.
            await job.emit_event(job.input_data["key"], {"too": "late"})
            await job.sleep(0.3)
            return ProcessorResult({"timed_out": exc.key})
        return ProcessorResult({"timed_out": None})


class ParentTimesOut(BaseProcessor):
    """Waits for two slow children with a short timeout, then sleeps while they end: the rerun
    after the sleep must find the wait timed out still, not the children ended."""

    async def process(self, job: Job) -> ProcessorResult:
        ids = await job.spawn([JobCreate("durable.child", {"n": i, "seconds": 1.0}) for i in range(2)])
        try:
            records = await job.wait_for_jobs(ids, timeout=0.3)
        except JobWaitTimeout as exc:
            pending = sorted(exc.statuses.values())
            if pending:  # on the run that timed out: what each child was doing then
                await job.step("pending", lambda: pending)
            await job.sleep(2.0)
            return ProcessorResult({"timed_out": True})
        return ProcessorResult({"timed_out": False, "statuses": [str(r.status) for r in records]})


class SleepThenStamp(BaseProcessor):
    """Sleeps, then returns when it woke, to compare with the wake time its checkpoint stored."""

    async def process(self, job: Job) -> ProcessorResult:
        await job.sleep(job.input_data["seconds"])
        return ProcessorResult({"woke": datetime.now(UTC).isoformat()})


PROCESSOR_MAP = {
    "durable.three_steps": ThreeSteps,
    "durable.sleep": Sleeper,
    "durable.wait": Waiter,
    "durable.parent": Parent,
    "durable.child": Child,
    "durable.twice": SameNameTwice,
    "durable.wait_others": WaitForOthers,
    "durable.approval": StepsThenApproval,
    "durable.fails_once": StepFailsOnce,
    "durable.timed": TimedWaits,
    "durable.stamp": SleepThenStamp,
    "durable.parent_times_out": ParentTimesOut,
}
