"""The worker against a real PostgreSQL: results, retries, pipelines, approval, plain-SQL enqueue."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import asyncpg

from tests.helpers import RunningWorker, assert_no_job_lost, wait_for
from worker.core.errors import PermanentJobError
from worker.core.models import Job, JobCreate, ProcessorResult
from worker.core.processor import BaseProcessor
from worker.processors.builtin import EchoProcessor, SleepProcessor
from worker.processors.demo_video import PROCESSOR_MAP as DEMO_MAP
from worker.processors.demo_video import demo_pipeline
from worker.store import transitions


async def done(conn: asyncpg.Connection, *ids: str, status: str = "completed") -> bool:
    n = await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = $2",
                            list(ids), status)
    return n == len(ids)


async def test_plain_sql_insert_is_picked_up(conn: asyncpg.Connection, dsn: str) -> None:
    user_id = await conn.fetchval("INSERT INTO users DEFAULT VALUES RETURNING id")
    await conn.execute("INSERT INTO jobs (id, type, user_id, input_data, dependent_on_jobs, pipeline_id) "
                       "VALUES ('sql-1', 'echo', $1, '{\"hello\": \"sql\"}', '[]', NULL)", user_id)
    await conn.execute("INSERT INTO jobs (id, type, user_id, input_data, dependent_on_jobs, pipeline_id) "
                       "VALUES ('sql-2', 'echo', $1, '{\"after\": 1}', '[\"sql-1\"]', 'p1')", user_id)
    worker = RunningWorker(dsn, {"echo": EchoProcessor()})
    try:
        await wait_for(lambda: done(conn, "sql-1", "sql-2"), what="plain-SQL jobs to complete")
    finally:
        await worker.stop()
    rows = {r["id"]: r for r in await conn.fetch("SELECT * FROM jobs")}
    assert rows["sql-1"]["result_data"] == {"hello": "sql"}
    assert rows["sql-2"]["user_id"] == user_id
    assert rows["sql-1"]["completed_at"] <= rows["sql-2"]["started_at"]


async def test_worker_claims_only_its_types(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await transitions.enqueue(conn, [JobCreate("echo", {}), JobCreate("unknown.type", {})])
    worker = RunningWorker(dsn, {"echo": EchoProcessor()})
    try:
        await wait_for(lambda: done(conn, ids[0]), what="echo job")
        await asyncio.sleep(0.3)
    finally:
        await worker.stop()
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", ids[1]) == "queued"


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


async def test_demo_pipeline_with_approval(conn: asyncpg.Connection, dsn: str) -> None:
    first = demo_pipeline("tests", duration_scale=0, fail_rate=0)
    await transitions.enqueue(conn, [first])
    worker = RunningWorker(dsn, {t: cls() for t, cls in DEMO_MAP.items()})
    try:
        render = await wait_for(lambda: conn.fetchval(
            "SELECT id FROM jobs WHERE type = 'video.render' AND status = 'waiting_approval'"),
            what="the render stage to wait for approval")
        assert await conn.fetchval("SELECT status FROM jobs WHERE type = 'video.composite'") == "queued"
        await transitions.approve(conn, [render], transitions.Actor("api", "tester"))
        await wait_for(lambda: conn.fetchval(
            "SELECT count(*) = 5 AND bool_and(status = 'completed') FROM jobs"), what="the demo to finish")
    finally:
        await worker.stop()
    types = await conn.fetch("SELECT type, pipeline_id, dependent_on_jobs FROM jobs ORDER BY seq")
    assert [t["type"] for t in types][0] == "video.script"
    assert {t["pipeline_id"] for t in types} == {first.id}


class Slow(BaseProcessor):
    running = 0
    peak = 0

    async def process(self, job: Job) -> ProcessorResult:
        Slow.running += 1
        Slow.peak = max(Slow.peak, Slow.running)
        try:
            await asyncio.sleep(0.1)
        finally:
            Slow.running -= 1
        return ProcessorResult({})


async def test_concurrency_limit(conn: asyncpg.Connection, dsn: str) -> None:
    Slow.running = Slow.peak = 0
    await transitions.enqueue(conn, [JobCreate("slow", {}) for _ in range(40)])
    worker = RunningWorker(dsn, {"slow": Slow()}, MAX_CONCURRENT_JOBS=4)
    try:
        await wait_for(lambda: conn.fetchval("SELECT bool_and(status = 'completed') FROM jobs"), what="all jobs")
    finally:
        await worker.stop()
    assert Slow.peak == 4


class BadResult(BaseProcessor):
    async def process(self, job: Job) -> Any:
        return {"not": "a ProcessorResult"}


async def test_a_bad_result_is_a_failed_attempt(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("bad", {})])
    worker = RunningWorker(dsn, {"bad": BadResult()}, JOB_RETRY_INTERVALS=[])
    try:
        await wait_for(lambda: done(conn, job_id, status="failed"), what="failure")
    finally:
        await worker.stop()
    assert "not ProcessorResult" in await conn.fetchval("SELECT error_message FROM jobs WHERE id = $1", job_id)


async def test_running_job_cancelled_by_operator(conn: asyncpg.Connection, dsn: str) -> None:
    a = JobCreate("sleep", {"seconds": 30})
    b = JobCreate("sleep", {"seconds": 0}, dependent_on_jobs=[a.id])
    await transitions.enqueue(conn, [a, b])
    worker = RunningWorker(dsn, {"sleep": SleepProcessor()})
    try:
        await wait_for(lambda: done(conn, a.id, status="in_progress"), what="the job to start")
        await transitions.cancel(conn, [a.id], transitions.Actor("api", "tester"))
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await wait_for(lambda: done(conn, a.id, b.id, status="cancelled"), interval=0.02, what="cancellation")
        assert loop.time() - t0 < 1.0
    finally:
        await worker.stop()
    outcome = await conn.fetchval("SELECT outcome FROM job_attempts WHERE job_id = $1", a.id)
    assert outcome == "cancelled"
    await assert_no_job_lost(conn, 2)


async def test_cancel_without_notify_is_seen_at_the_next_heartbeat(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("sleep", {"seconds": 30})])
    worker = RunningWorker(dsn, {"sleep": SleepProcessor()}, JOB_HEARTBEAT_INTERVAL=0.3)
    try:
        await wait_for(lambda: done(conn, job_id, status="in_progress"), what="the job to start")
        await conn.execute("UPDATE jobs SET is_active = false WHERE id = $1", job_id)  # no NOTIFY
        await wait_for(lambda: done(conn, job_id, status="cancelled"), timeout=2, what="cancellation")
    finally:
        await worker.stop()


async def test_a_dependant_starts_at_once_though_nothing_announces_it(conn: asyncpg.Connection, dsn: str) -> None:
    """A worker waits for news after a round that completed jobs: the release of a dependant
    is news (a NOTIFY), so the dependant starts well within the (long) poll interval."""
    parent = JobCreate("echo", {"n": 1})
    chain = [parent, JobCreate("echo", {"n": 2}, dependent_on_jobs=[parent.id])]
    worker = RunningWorker(dsn, {"echo": EchoProcessor()}, JOB_PROCESSOR_POLL_INTERVAL=5.0)
    try:
        await asyncio.sleep(0.5)  # idle: its rounds are over, and it waits for news
        await transitions.enqueue(conn, chain)
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 2 FROM jobs WHERE status = 'completed'"),
                       timeout=2, what="the dependant, well before the 5 s poll")
    finally:
        await worker.stop()


async def test_a_trickle_of_jobs_costs_no_claim_after_each_completion(conn: asyncpg.Connection, dsn: str) -> None:
    """Each job announced alone costs two round trips: one pump claims it (every lane, as the
    other waits), then one pump completes it. Before, both pumps claimed (one found nothing)
    and a claim followed each completion: four."""
    worker = RunningWorker(dsn, {"echo": EchoProcessor()}, JOB_PROCESSOR_POLL_INTERVAL=5.0)
    try:
        await asyncio.sleep(0.5)
        before = worker.worker.stats["rounds"]
        for i in range(20):
            await transitions.enqueue(conn, [JobCreate("echo", {"n": i})])
            await wait_for(lambda n=i + 1: conn.fetchval(
                "SELECT count(*) = $1 FROM jobs WHERE status = 'completed'", n), what=f"job {i}")
        rounds = worker.worker.stats["rounds"] - before
    finally:
        await worker.stop()
    assert rounds <= 2 * 20 + 2, rounds
