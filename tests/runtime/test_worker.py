"""The whole worker against a real PostgreSQL: a plain-SQL insert picked up, the demo pipeline with
its approval, a cancel seen at the heartbeat. Its parts have test modules of their own: test_pump,
test_execution, test_outcomes and test_listening."""

from __future__ import annotations

import asyncpg

from jobdesk.core.models import JobCreate
from jobdesk.processors.builtin import EchoProcessor, SleepProcessor
from jobdesk.processors.demo_video import PROCESSOR_MAP as DEMO_MAP
from jobdesk.processors.demo_video import demo_pipeline
from jobdesk.store import transitions
from tests.helpers import RunningWorker, wait_for


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


async def test_cancel_without_notify_is_seen_at_the_next_heartbeat(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("sleep", {"seconds": 30})])
    worker = RunningWorker(dsn, {"sleep": SleepProcessor()}, JOB_HEARTBEAT_INTERVAL=0.3)
    try:
        await wait_for(lambda: done(conn, job_id, status="in_progress"), what="the job to start")
        await conn.execute("UPDATE jobs SET is_active = false WHERE id = $1", job_id)  # no NOTIFY
        await wait_for(lambda: done(conn, job_id, status="cancelled"), timeout=2, what="cancellation")
    finally:
        await worker.stop()
