"""Delayed jobs and unique jobs, through the Python API and plain SQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from jobdesk.core.errors import IllegalTransition
from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.store import transitions
from jobdesk.store.db import connect
from tests.helpers import RecordsStarts, RunningWorker, wait_for


async def claim(conn: asyncpg.Connection, types: list[str], limit: int = 100) -> list[str]:
    _, jobs = await transitions.complete_and_claim(conn, "w", types, limit)
    return [j.id for j in jobs]


# -- delayed jobs ---------------------------------------------------------------------------

async def test_a_scheduled_job_waits_queued_and_is_claimed_once_due(conn: asyncpg.Connection) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=0.6)
    [later] = await transitions.enqueue(conn, [JobCreate("a", {}, scheduled_at=soon)])
    [now_id] = await transitions.enqueue(conn, [JobCreate("a", {})])
    row = await conn.fetchrow("SELECT status, scheduled_at, run_at FROM jobs WHERE id = $1", later)
    assert row["status"] == "queued" and row["scheduled_at"] == soon and row["run_at"] == soon
    assert await claim(conn, ["a"]) == [now_id]
    await asyncio.sleep(0.65)
    assert await claim(conn, ["a"]) == [later]


async def test_plain_sql_schedules_and_a_past_time_runs_now(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, scheduled_at) VALUES "
                       "('later', 'a', '{}', now() + interval '1 hour'), "
                       "('past', 'a', '{}', now() - interval '1 hour')")
    assert await conn.fetchval("SELECT run_at IS NULL FROM jobs WHERE id = 'past'")
    assert await claim(conn, ["a"]) == ["past"]
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'later'") == "queued"


async def test_plain_sql_moves_a_queued_jobs_time_either_way(conn: asyncpg.Connection) -> None:
    """`UPDATE jobs SET scheduled_at = ...` on a queued job puts it off or brings it forward."""
    await conn.execute("INSERT INTO jobs (id, type, input_data, scheduled_at) VALUES "
                       "('put_off', 'a', '{}', NULL), ('brought', 'a', '{}', now() + interval '1 hour')")
    await conn.execute("UPDATE jobs SET scheduled_at = now() + interval '2 hours' WHERE id = 'put_off'")
    await conn.execute("UPDATE jobs SET scheduled_at = now() - interval '1 second' WHERE id = 'brought'")
    row = await conn.fetchrow("SELECT run_at, scheduled_at FROM jobs WHERE id = 'put_off'")
    assert row["run_at"] == row["scheduled_at"]
    assert await claim(conn, ["a"]) == ["brought"], "only the job whose time has come"
    await conn.execute("UPDATE jobs SET scheduled_at = NULL WHERE id = 'put_off'")
    assert await claim(conn, ["a"]) == ["put_off"]
    # Not queued any more: its time is only a record; nothing else about the job changes.
    await conn.execute("UPDATE jobs SET scheduled_at = now() + interval '1 hour' WHERE id = 'put_off'")
    assert await conn.fetchval("SELECT (status, run_at IS NULL)::text FROM jobs WHERE id = 'put_off'") \
        == "(in_progress,t)"


async def test_a_naive_time_is_local_time(conn: asyncpg.Connection) -> None:
    naive = datetime.now() + timedelta(hours=1)
    [job_id] = await transitions.enqueue(conn, [JobCreate("a", {}, scheduled_at=naive)])
    stored = await conn.fetchval("SELECT scheduled_at FROM jobs WHERE id = $1", job_id)
    assert abs((stored - naive.astimezone()).total_seconds()) < 0.001


async def test_a_due_job_starts_within_the_poll_interval_of_its_time(conn: asyncpg.Connection, dsn: str) -> None:
    poll = 0.1
    processor = RecordsStarts()
    worker = RunningWorker(dsn, {"a": processor}, JOB_PROCESSOR_POLL_INTERVAL=poll)
    try:
        due: dict[str, float] = {}
        for i in range(3):
            at = datetime.now(UTC) + timedelta(seconds=0.5 + 0.23 * i)  # different moments of the poll cycle
            [job_id] = await transitions.enqueue(conn, [JobCreate("a", {}, scheduled_at=at)])
            due[job_id] = at.timestamp()
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 3 FROM jobs WHERE status = 'completed'"),
                       what="the scheduled jobs")
    finally:
        await worker.stop()
    for job_id, at in due.items():
        assert -0.01 <= processor.starts[job_id] - at <= poll + 0.05, (job_id, processor.starts[job_id] - at)


# -- unique jobs ----------------------------------------------------------------------------

async def test_a_duplicate_creates_nothing_and_returns_the_holder(conn: asyncpg.Connection) -> None:
    [first] = await transitions.enqueue(conn, [JobCreate("a", {}, unique_key="k")])
    dup = JobCreate("a", {"x": 1}, unique_key="k")
    assert await transitions.enqueue_detailed(conn, [dup]) == [(first, True)]
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 1
    # Once the holder has finished, the key is free again.
    await claim(conn, ["a"])
    await transitions.complete_and_claim(conn, "w", [], 0, [(Job(first, "a", {}, 1, None, 0), ProcessorResult({}))])
    again = JobCreate("a", {}, unique_key="k")
    assert await transitions.enqueue_detailed(conn, [again]) == [(again.id, False)]


async def test_a_batch_with_duplicates_rewrites_dependencies(conn: asyncpg.Connection) -> None:
    [held] = await transitions.enqueue(conn, [JobCreate("a", {}, unique_key="k1")])
    dup = JobCreate("a", {}, unique_key="k1")
    twin_a = JobCreate("a", {}, unique_key="k2")
    twin_b = JobCreate("a", {}, unique_key="k2")
    child = JobCreate("b", {}, dependent_on_jobs=[dup.id, twin_b.id])
    out = await transitions.enqueue_detailed(conn, [dup, twin_a, twin_b, child])
    assert out == [(held, True), (twin_a.id, False), (twin_a.id, True), (child.id, False)]
    deps = await conn.fetchval("SELECT dependent_on_jobs FROM jobs WHERE id = $1", child.id)
    assert sorted(deps) == sorted([held, twin_a.id])
    assert await conn.fetchval("SELECT pending_deps FROM jobs WHERE id = $1", child.id) == 2
    assert await transitions.enqueue(conn, [JobCreate("a", {}, unique_key="k2")]) == [twin_a.id]


async def test_a_pipeline_with_a_duplicate(conn: asyncpg.Connection) -> None:
    [held] = await transitions.enqueue(conn, [JobCreate("render", {}, unique_key="scene-1")])
    first = JobCreate("render", {}, unique_key="scene-1", pipeline_id="p1")
    second = JobCreate("encode", {}, dependent_on_jobs=[first.id], pipeline_id="p1")
    assert await transitions.enqueue(conn, [first, second]) == [held, second.id]
    assert await conn.fetchval("SELECT dependent_on_jobs FROM jobs WHERE id = $1", second.id) == [held]


async def test_eight_concurrent_enqueuers_make_one_job(conn: asyncpg.Connection, dsn: str) -> None:
    conns = [await connect(dsn) for _ in range(8)]
    try:
        async def one(c: asyncpg.Connection) -> tuple[str, bool]:
            [out] = await transitions.enqueue_detailed(c, [JobCreate("a", {}, unique_key="same")])
            return out
        results = await asyncio.gather(*(one(c) for c in conns))
    finally:
        for c in conns:
            await c.close()
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 1
    job_id = await conn.fetchval("SELECT id FROM jobs")
    assert {r[0] for r in results} == {job_id}
    assert sorted(r[1] for r in results) == [False] + [True] * 7


async def test_plain_sql_on_conflict_do_nothing(conn: asyncpg.Connection) -> None:
    # `jobs` is partitioned (sql/041): the key's index is its live partition's, and the insert
    # names no arbiter, as docs/scheduling.md shows.
    statement = ("INSERT INTO jobs (id, type, input_data, unique_key) VALUES ($1, 'a', '{}', 'nightly') "
                 "ON CONFLICT DO NOTHING")
    await conn.execute(statement, "one")
    await conn.execute(statement, "two")
    assert [r["id"] for r in await conn.fetch("SELECT id FROM jobs")] == ["one"]
    with pytest.raises(asyncpg.UniqueViolationError):
        await conn.execute("INSERT INTO jobs (id, type, input_data, unique_key) VALUES ('three', 'a', '{}', 'nightly')")


async def test_retrying_a_job_whose_key_is_held_again_is_refused(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, unique_key, status) VALUES "
                       "('old', 'a', '{}', 'k', 'failed')")
    await transitions.enqueue(conn, [JobCreate("a", {}, unique_key="k")])
    with pytest.raises(IllegalTransition, match="unique key"):
        await transitions.retry(conn, ["old"], transitions.Actor("cli"))
