"""A claim lost in a failover: the idle claim commits asynchronously, so a promoted standby may
not have it, and the same worker claims the job again under the same attempt number. The job
runs once and completes; a result that cannot be written is recorded as cancelled only when an
operator cancelled the job. And a worker whose connections land on a read-only server drops
them and reconnects."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import asyncpg

from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.settings import load_settings
from jobdesk.runtime.dblink import DbLink
from jobdesk.runtime.outcomes import Outcomes
from jobdesk.store import rollup, transitions
from tests.helpers import RunningWorker, wait_for


class Counted(BaseProcessor):
    """Sleeps `seconds`, counting its runs per job."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    async def process(self, job: Job) -> ProcessorResult:
        self.runs[job.id] = self.runs.get(job.id, 0) + 1
        await asyncio.sleep(float(job.input_data["seconds"]))
        return ProcessorResult(result_data={"ran": True})


async def _status(conn: asyncpg.Connection, job_id: str) -> str:
    return str(await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id))


async def test_a_claim_made_again_does_not_run_the_job_twice(conn: asyncpg.Connection, dsn: str) -> None:
    job = JobCreate("slow", {"seconds": 1.5})
    await transitions.enqueue(conn, [job])
    processor = Counted()
    worker = RunningWorker(dsn, {"slow": processor})
    try:
        await wait_for(lambda: _is(conn, job.id, "in_progress"), what="the job to start")
        # What a promoted standby holds when the asynchronous claim did not reach it: the job
        # queued, its attempts as before the claim.
        await conn.execute("UPDATE jobs SET status = 'queued', worker_id = NULL, started_at = NULL, "
                           "attempts = attempts - 1 WHERE id = $1", job.id)
        await wait_for(lambda: _is(conn, job.id, "in_progress"), what="the claim made again")
        await wait_for(lambda: _is(conn, job.id, "completed"), what="the completion")
    finally:
        await worker.stop()
    assert processor.runs == {job.id: 1}
    row = await conn.fetchrow("SELECT attempts, result_data FROM jobs WHERE id = $1", job.id)
    assert row["attempts"] == 1 and row["result_data"] == {"ran": True}
    outcomes = await conn.fetch("SELECT outcome FROM job_attempts WHERE job_id = $1", job.id)
    assert "cancelled" not in [r["outcome"] for r in outcomes]


async def _is(conn: asyncpg.Connection, job_id: str, status: str) -> bool:
    return await _status(conn, job_id) == status


async def test_an_unwritten_result_is_cancelled_only_when_an_operator_cancelled(conn: asyncpg.Connection) -> None:
    job = JobCreate("t", {})
    await transitions.enqueue(conn, [job])
    await conn.execute("UPDATE jobs SET status = 'in_progress', worker_id = 'w1', attempts = 1 WHERE id = $1", job.id)
    claimed = Job(job.id, "t", {}, None, None, 0, attempt=1)
    assert not await transitions.mark_cancelled(conn, "w1", claimed)
    assert await _status(conn, job.id) == "in_progress"
    await transitions.cancel(conn, [job.id], transitions.Actor("api", "tester"))
    assert await transitions.mark_cancelled(conn, "w1", claimed)
    assert await _status(conn, job.id) == "cancelled"


async def test_the_worker_link_reconnects_off_a_read_only_server(conn: asyncpg.Connection, dsn: str) -> None:
    database = urlsplit(dsn).path.lstrip("/")
    await conn.execute(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    link = DbLink(dsn)
    await link.open(2)
    try:
        write = asyncio.create_task(link.call(lambda c: c.execute(
            "INSERT INTO users (id, name) VALUES (42, 'written')")))
        await wait_for(lambda: _down(link), what="the write to be refused")
        # New sessions are writable again; the sessions the pool opened before are not, so the
        # write goes through only if the link drops them and connects again.
        await conn.execute(f"ALTER DATABASE {database} RESET default_transaction_read_only")
        await asyncio.wait_for(write, 30)
    finally:
        await link.close(5)
    assert await conn.fetchval("SELECT name FROM users WHERE id = 42") == "written"


async def _down(link: DbLink) -> bool:
    return link.down


async def test_a_result_whose_claim_was_lost_is_written_once(conn: asyncpg.Connection) -> None:
    lost, taken = JobCreate("t", {}), JobCreate("t", {})
    await transitions.enqueue(conn, [lost, taken])
    # `taken` was claimed by another worker since; `lost` is queued as before the lost claim.
    await conn.execute("UPDATE jobs SET status = 'in_progress', worker_id = 'w2', attempts = 1 WHERE id = $1",
                       taken.id)
    ran = [(Job(i, "t", {}, None, None, 0, attempt=1), ProcessorResult(result_data={"ok": i}))
           for i in (lost.id, taken.id)]
    assert await transitions.complete_lost_claims(conn, ran) == {lost.id}
    assert await transitions.complete_lost_claims(conn, ran) == set()
    row = await conn.fetchrow("SELECT status, attempts, result_data FROM jobs WHERE id = $1", lost.id)
    assert (row["status"], row["attempts"], row["result_data"]) == ("completed", 1, {"ok": lost.id})
    assert await _status(conn, taken.id) == "in_progress"


async def test_the_worker_link_plans_from_indexes_without_sorts_or_whole_table_reads(dsn: str) -> None:
    """The worker's connections keep the planner to orders and rows that indexes give: a claim
    planned from statistics taken while no job was queued otherwise read and sorted every queued
    job each round (benchmarks/growth_bench.py; worker/store/db.py `orders_from_indexes`)."""
    link = DbLink(dsn)
    await link.open(1)
    try:
        settings = await link.call(lambda c: c.fetchrow(
            "SELECT current_setting('enable_sort') AS sort, current_setting('enable_seqscan') AS seqscan"))
    finally:
        await link.close(5)
    assert dict(settings) == {"sort": "off", "seqscan": "off"}


async def test_a_result_waits_for_the_answer_of_a_claim_of_this_worker_that_took_the_job_again(
        conn: asyncpg.Connection, dsn: str) -> None:
    """A finished job's completion did not apply (its claim was lost in a failover), and while the
    worker finds out why, one of its own claim rounds takes the job again and commits, but has not
    read its answer yet. The result must wait for that answer and be written under the new claim:
    dropped, the job would run a second time."""
    job = JobCreate("t", {})
    await transitions.enqueue(conn, [job])
    # The job as the claim round left it: taken again by this worker, under attempt 1.
    await conn.execute("UPDATE jobs SET status = 'in_progress', worker_id = 'w1', attempts = 1 WHERE id = $1", job.id)
    link = DbLink(dsn)
    await link.open(1)
    try:
        outcomes = Outcomes(link, "w1", load_settings(DATABASE_URL=dsn), stats={}, rollup=rollup.Rollup(),
                            metrics=None, send_alert=lambda _alert: None)
        ran = Job(job.id, "t", {}, None, None, 0, attempt=1)
        outcomes.unwritten[job.id] = (ran, ProcessorResult({"ran": True}))
        await outcomes._not_written(ran)
        # Now the claim's answer is read: the result is written under it, the job not run again.
        assert outcomes.claimed_again(Job(job.id, "t", {}, None, None, 0, attempt=1))
        assert [(j.id, r.result_data) for j, r in outcomes.plain_done] == [(job.id, {"ran": True})]
    finally:
        await link.close(5)
