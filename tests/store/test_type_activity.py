"""Each type at a glance (sql/035): the 5-second rollup written by a real worker's completions and
failures, read back as 60 counts per type; running, queued and the limit in force; and the reads
do not scan `jobs`."""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg

from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.type_controls import GLANCE_BUCKETS
from jobdesk.service.jobs import JobService
from jobdesk.store import rollup as stats_rollup
from jobdesk.store import transitions, type_activity
from tests.helpers import RunningWorker, reads_of_jobs, run_cli, wait_for


class MaybeFail(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        if job.input_data.get("fail"):
            raise RuntimeError("boom")
        if job.input_data.get("hold"):
            await asyncio.sleep(job.input_data["hold"])
        return ProcessorResult(result_data={})


async def test_a_workers_completions_and_failures_fill_the_5s_rollup(dsn: str, conn: asyncpg.Connection) -> None:
    # 4 echo jobs complete; 1 fails twice (a retry, then for good): 5 finished, 2 failed attempts.
    await transitions.enqueue(conn, [JobCreate("echo", {"n": i}) for i in range(4)]
                              + [JobCreate("echo", {"fail": True})])
    worker = RunningWorker(dsn, {"echo": MaybeFail()}, JOB_RETRY_INTERVALS=[0.05])
    await wait_for(lambda: conn.fetchval("SELECT count(*) = 5 FROM jobs WHERE status IN ('completed', 'failed')"),
                   what="the worker to finish its jobs")
    await worker.stop()  # a stopping worker writes what it holds
    rows = await conn.fetch("SELECT bucket, finished, failed FROM job_stats_5s WHERE type = 'echo'")
    assert sum(r["finished"] for r in rows) == 5 and sum(r["failed"] for r in rows) == 2
    assert all(r["bucket"].timestamp() % 5 == 0 for r in rows)
    echo = (await type_activity.type_activity(conn, ["echo"]))["echo"]
    assert len(echo.throughput) == GLANCE_BUCKETS == len(echo.failed) == 60
    assert sum(echo.throughput) == 5 and sum(echo.failed) == 2
    # The newest bucket is the last one: the jobs just finished are in the last few.
    assert sum(echo.throughput[-3:]) == 5


async def test_buckets_are_oldest_first_and_old_rows_are_pruned(conn: asyncpg.Connection) -> None:
    now = time.time()
    rollup = stats_rollup.Rollup()
    rollup.attempt_ended("t", None, 1.0, completed=True, at=now - 290)  # the first bucket, or the second
    rollup.attempt_ended("t", None, 1.0, attempt_failed=True, at=now)
    rollup.attempt_ended("t", None, 1.0, completed=True, at=now - 400)  # out of the window
    rollup.attempt_ended("t", None, 1.0, completed=True, at=now - 3600)  # pruned
    await stats_rollup.write(conn, rollup.take())
    got = (await type_activity.type_activity(conn, ["t"]))["t"]
    assert sum(got.throughput[:2]) == 1 and sum(got.throughput) == 1
    assert got.failed[-1] == 1 and sum(got.failed) == 1
    assert await stats_rollup.sample_depth(conn) is True  # the worker that counts the depth prunes
    assert await conn.fetchval("SELECT count(*) FROM job_stats_5s") == 3


async def test_running_queued_and_limit_in_types(dsn: str, conn: asyncpg.Connection) -> None:
    await transitions.enqueue(conn, [JobCreate("slow", {"hold": 30}) for _ in range(5)])
    await transitions.enqueue(conn, [JobCreate("idle", {}) for _ in range(3)])
    worker = RunningWorker(dsn, {"slow": MaybeFail()}, JOB_TYPE_LIMITS="slow=2", JOB_SHUTDOWN_TIMEOUT=0.2)
    await wait_for(lambda: conn.fetchval("SELECT count(*) = 2 FROM jobs WHERE status = 'in_progress'"),
                   what="two jobs running")
    service = JobService(await asyncpg.create_pool(dsn, min_size=1, max_size=2), source="cli")
    try:
        by_type = {t.type: t for t in await service.types()}
        slow = by_type["slow"].to_json()
        assert (slow["running"], slow["queued"], slow["queued_capped"], slow["limit"]) == (2, 3, False, 2)
        assert len(slow["throughput"]) == 60 and len(slow["failed"]) == 60
        done = run_cli("types", "--json", dsn=dsn)
        assert done.returncode == 0, done.stderr
        listed = {t["type"]: t for t in json.loads(done.stdout)["types"]}
        assert (listed["slow"]["running"], listed["slow"]["queued"], listed["slow"]["limit"]) == (2, 3, 2)
        # A type with no limit says null.
        await service.pause_type("idle")
        idle = (await service.type_control("idle")).to_json()
        assert (idle["running"], idle["queued"], idle["limit"]) == (0, 3, None)
        # Counted up to the cap, and said so.
        capped = (await type_activity.type_activity(conn, ["idle"], cap=2))["idle"]
        assert (capped.queued, capped.queued_capped) == (2, True)
    finally:
        await service.pool.close()
        await worker.stop()  # the running jobs go back to the queue


async def test_the_glance_reads_a_bounded_part_of_jobs(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'other', '{}' FROM generate_series(1, 20000)")
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'bulk', '{}' FROM generate_series(1, 300)")
    await conn.execute("INSERT INTO type_limits (type, max_running) VALUES ('bulk', 4)")
    await conn.execute("ANALYZE jobs")
    before = await reads_of_jobs(conn)
    for _ in range(3):
        got = (await type_activity.type_activity(conn, ["bulk", "other"], cap=100))
    after = await reads_of_jobs(conn)
    assert [(a.queued, a.queued_capped) for a in got.values()] == [(100, True), (100, True)]
    # Each call reads at most cap + 1 queued jobs of each type, whatever the table holds.
    assert after.rows - before.rows <= 3 * 2 * 101, (before, after)
