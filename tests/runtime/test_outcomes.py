"""What becomes of a job once its processor returns or raises, against a real PostgreSQL: the
retry schedule, a permanent error, and the next jobs a result creates."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg

from jobdesk.core.errors import PermanentJobError
from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.store import transitions
from tests.helpers import RunningWorker, wait_for


async def done(conn: asyncpg.Connection, *ids: str, status: str = "completed") -> bool:
    n = await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = $2",
                            list(ids), status)
    return n == len(ids)


class AlwaysFails(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        raise RuntimeError(f"boom on attempt {job.attempt}")


async def test_retry_schedule_n_intervals_mean_n_retries(conn: asyncpg.Connection, dsn: str) -> None:
    intervals = [0.3, 0.6, 0.9]
    [job_id] = await transitions.enqueue(conn, [JobCreate("flaky", {})])
    seen: list[tuple[int, timedelta]] = []

    async def record_retry() -> bool:
        row = await conn.fetchrow("SELECT status, retry_count, next_retry_at, updated_at FROM jobs WHERE id = $1",
                                  job_id)
        if row["status"] == "queued" and row["retry_count"] > len(seen):
            seen.append((row["retry_count"], row["next_retry_at"] - row["updated_at"]))
        return row["status"] == "failed"

    worker = RunningWorker(dsn, {"flaky": AlwaysFails()}, JOB_RETRY_INTERVALS=intervals,
                           JOB_PROCESSOR_POLL_INTERVAL=0.02)
    try:
        await wait_for(record_retry, interval=0.01, what="the job to fail for good")
    finally:
        await worker.stop()
    assert [k for k, _ in seen] == [1, 2, 3]
    for (k, delay), expected in zip(seen, intervals):
        assert abs(delay.total_seconds() - expected) < 0.05, (k, delay)
    row = await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)
    assert row["status"] == "failed" and row["retry_count"] == 3
    assert row["error_message"] == "RuntimeError: boom on attempt 4"
    history = await conn.fetch("SELECT * FROM job_attempts WHERE job_id = $1 ORDER BY attempt", job_id)
    assert [h["attempt"] for h in history] == [1, 2, 3, 4]
    assert all(h["outcome"] == "failed" and "Traceback" in h["traceback"] for h in history)
    # Each retry waited at least its interval after the previous failure.
    for prev, nxt, gap in zip(history, history[1:], intervals):
        assert (nxt["started_at"] - prev["finished_at"]).total_seconds() >= gap - 0.01


class FailsPermanently(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        raise PermanentJobError("bad input, no point retrying")


async def test_permanent_error_fails_at_once(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("perm", {})])
    worker = RunningWorker(dsn, {"perm": FailsPermanently()})
    try:
        await wait_for(lambda: done(conn, job_id, status="failed"), what="failure")
    finally:
        await worker.stop()
    row = await conn.fetchrow("SELECT retry_count, error_message FROM jobs WHERE id = $1", job_id)
    assert row["retry_count"] == 0 and "no point retrying" in row["error_message"]


class FanOut(BaseProcessor):
    """a -> (b1, b2, b3) -> c, created as next_jobs; records the order it ran things in."""

    order: list[str] = []

    async def process(self, job: Job) -> ProcessorResult:
        stage = job.input_data["stage"]
        FanOut.order.append(stage)
        await asyncio.sleep(0.05 if stage.startswith("b") else 0)
        if stage != "a":
            return ProcessorResult({"stage": stage})
        branches = [JobCreate("fan", {"stage": f"b{i}"}) for i in range(3)]
        join = JobCreate("fan", {"stage": "c"}, dependent_on_jobs=[b.id for b in branches])
        return ProcessorResult({"stage": "a"}, next_jobs=[join, *branches])


async def test_fan_out_fan_in_from_next_jobs(conn: asyncpg.Connection, dsn: str) -> None:
    FanOut.order = []
    [root] = await transitions.enqueue(conn, [JobCreate("fan", {"stage": "a"}, pipeline_id="pipe-1", user_id=1)])
    worker = RunningWorker(dsn, {"fan": FanOut()})
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 5 AND bool_and(status = 'completed') FROM jobs"),
                       what="the pipeline to finish")
    finally:
        await worker.stop()
    assert FanOut.order[0] == "a" and FanOut.order[-1] == "c"
    assert sorted(FanOut.order[1:4]) == ["b0", "b1", "b2"]
    rows = await conn.fetch("SELECT input_data->>'stage' AS stage, started_at, completed_at, pipeline_id, "
                            "user_id FROM jobs")
    by_stage = {r["stage"]: r for r in rows}
    assert {r["pipeline_id"] for r in rows} == {"pipe-1"}, "children inherit the pipeline"
    # The branches ran in parallel: each started before any other finished.
    branches = [by_stage[f"b{i}"] for i in range(3)]
    assert max(b["started_at"] for b in branches) < min(b["completed_at"] for b in branches)
    assert by_stage["c"]["started_at"] >= max(b["completed_at"] for b in branches)
