"""Running one job against a real PostgreSQL: a result that is no ProcessorResult, and an
operator's cancel of the running task."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from jobdesk.core.models import Job, JobCreate
from jobdesk.core.processor import BaseProcessor
from jobdesk.processors.builtin import SleepProcessor
from jobdesk.store import transitions
from tests.helpers import RunningWorker, assert_no_job_lost, wait_for


async def done(conn: asyncpg.Connection, *ids: str, status: str = "completed") -> bool:
    n = await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = $2",
                            list(ids), status)
    return n == len(ids)


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
