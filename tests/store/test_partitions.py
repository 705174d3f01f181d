"""The partitioned `jobs` (sql/041): where rows go and come back, ids unique across partitions,
partitions made ahead, and retention that drops a partition while claims and inserts go on."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from jobdesk.core.models import JobCreate, ProcessorResult
from jobdesk.processors.builtin import EchoProcessor
from jobdesk.store import partitions, transitions
from jobdesk.store.db import connect
from jobdesk.store.transitions.claim import complete_and_claim
from tests.helpers import RunningWorker, history_partitions, wait_for
from tests.store.test_transitions import ACTOR


async def where(conn: asyncpg.Connection, job_id: str) -> str:
    return str(await conn.fetchval("SELECT tableoid::regclass::text FROM jobs WHERE id = $1", job_id))


async def test_a_job_moves_between_partitions_with_its_status(conn: asyncpg.Connection) -> None:
    [a] = await transitions.enqueue(conn, [JobCreate("echo", {})])
    assert await where(conn, a) == "jobs_live"
    await conn.execute("UPDATE jobs SET status = 'completed' WHERE id = $1", a)  # plain SQL
    assert (await where(conn, a)).startswith("jobs_completed_")
    assert await conn.fetchval("SELECT retain_from > now() - interval '1 minute' FROM jobs WHERE id = $1", a)
    await conn.execute("UPDATE jobs SET status = 'failed' WHERE id = $1", a)
    assert await where(conn, a) == "jobs_failed_cancelled"
    await transitions.retry(conn, [a], ACTOR)
    assert await where(conn, a) == "jobs_live"
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", a) == "queued"
    with pytest.raises(asyncpg.CheckViolationError, match="jobs_status_check"):
        await conn.execute("UPDATE jobs SET status = 'done' WHERE id = $1", a)


async def test_ids_are_unique_across_partitions(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('x', 't', '{}', 'completed'), "
                       "('y', 't', '{}', 'failed')")
    for status in ("queued", "completed", "cancelled"):
        with pytest.raises(asyncpg.UniqueViolationError, match='duplicate key value'):
            await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('x', 't', '{}', $1)", status)
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('y', 't', '{}', $1)", status)
    # A UUIDv7 given by hand is looked for too, and so is one by COPY.
    [done] = await transitions.enqueue(conn, [JobCreate("t", {})])
    await conn.execute("UPDATE jobs SET status = 'completed' WHERE id = $1", done)
    with pytest.raises(Exception, match="already exists"):
        await transitions.enqueue(conn, [JobCreate("t", {}, id=done)])
    with pytest.raises(Exception, match="already exists"):
        await transitions.enqueue(conn, [JobCreate("t", {}) for _ in range(300)] + [JobCreate("t", {}, id=done)])
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id = $1", done) == 1
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 3


async def test_the_mark_of_made_ids_is_for_one_statement(conn: asyncpg.Connection) -> None:
    """The enqueue's mark that its ids are its own never spares a later statement the look-up."""
    await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('x', 't', '{}', 'completed')")
    async with conn.transaction():
        await transitions.enqueue(conn, [JobCreate("t", {})])
        await transitions.enqueue(conn, [JobCreate("t", {}) for _ in range(300)])  # by COPY
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('x', 't', '{}')")


async def test_a_job_with_nowhere_to_go_lands_in_later_and_moves_when_partitions_are_made(
        conn: asyncpg.Connection) -> None:
    """Completed past every partition made (no worker made them): kept in jobs_completed_later,
    and moved, the same row, into the partition made for its time."""
    soon = datetime.now(UTC) + timedelta(hours=5)
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, retain_from, result_data) "
                       "VALUES ('late', 't', '{\"a\": 1}', 'completed', $1, '{\"r\": 2}')", soon)
    before = dict(await conn.fetchrow("SELECT * FROM jobs WHERE id = 'late'"))
    assert await where(conn, "late") == partitions.LATER
    made = await partitions.make_ahead(conn, 3600, 4 * 3600)
    assert len(made) >= 8
    assert await where(conn, "late") in made
    assert dict(await conn.fetchrow("SELECT * FROM jobs WHERE id = 'late'")) == before
    parts = await partitions.partitions(conn)
    assert [p.name for p in parts][0] == "jobs_completed_start" and parts[-1].name == partitions.LATER
    assert all(a.upper == b.lower for a, b in zip(parts, parts[1:], strict=False)), "no gap, no overlap"
    assert parts[-1].lower is not None and parts[-1].lower >= datetime.now(UTC) + timedelta(hours=4)
    assert await partitions.make_ahead(conn, 3600, 4 * 3600) == [], "far enough already"


async def test_workers_make_partitions_ahead(dsn: str, conn: asyncpg.Connection) -> None:
    worker = RunningWorker(dsn, {"echo": EchoProcessor()}, JOB_RETENTION_COMPLETED=240, JOB_PRUNE_INTERVAL=1)
    try:
        async def far_enough() -> bool:
            later = (await partitions.partitions(conn))[-1]
            return later.lower is not None and later.lower >= datetime.now(UTC) + timedelta(seconds=120)
        await wait_for(far_enough, what="partitions made ahead")
        widths = {(p.upper - p.lower).total_seconds() for p in (await partitions.partitions(conn))[1:-1]
                  if p.lower and p.upper and p.lower.timestamp() % 60 == 0}
        assert widths == {60.0}, "a quarter of the retention, at least a minute"
    finally:
        await worker.stop()


async def test_claims_and_inserts_go_on_while_a_partition_is_dropped(dsn: str, conn: asyncpg.Connection) -> None:
    """The drop detaches CONCURRENTLY: it waits for a reader of the partition, and nothing waits
    for it meanwhile: a claim, an insert, a completion."""
    await history_partitions(conn, 2)
    await conn.execute("INSERT INTO jobs (type, input_data, status, retain_from) "
                       "SELECT 't', '{}', 'completed', now() - interval '3 days' FROM generate_series(1, 1000)")
    reader = await connect(dsn)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        async with reader.transaction():
            assert await reader.fetchval("SELECT count(*) FROM jobs_completed_start") == 1000
            drop = asyncio.create_task(partitions.drop_due(pool, 86400, None))
            await asyncio.sleep(0.5)
            assert not drop.done(), "the detach waits for the reader"
            started = time.monotonic()
            [a] = await transitions.enqueue(conn, [JobCreate("echo", {})])
            await conn.execute("INSERT INTO jobs (type, input_data) VALUES ('echo', '{}')")
            _, claimed = await complete_and_claim(conn, "w", ["echo"], 1, [])
            assert [j.id for j in claimed] == [a]
            await complete_and_claim(conn, "w", ["echo"], 0, [(claimed[0], ProcessorResult({}))])
            assert time.monotonic() - started < 1.0
        dropped = await asyncio.wait_for(drop, 10)
    finally:
        await reader.close()
        await pool.close()
    assert [(d.name, d.jobs) for d in dropped] == [("jobs_completed_start", 1000)]
    assert await conn.fetchval("SELECT to_regclass('jobs_completed_start')") is None
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'completed'") == 1


async def test_a_partition_left_detached_is_dropped_by_the_next_run(dsn: str, conn: asyncpg.Connection) -> None:
    """A pruner that stopped between the detach and the drop leaves a table of old jobs: the next
    run drops it, and what other tables kept for its jobs."""
    await history_partitions(conn, 2)
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, retain_from) "
                       "VALUES ('gone', 't', '{}', 'completed', now() - interval '3 days')")
    await conn.execute("INSERT INTO job_attempts (job_id, attempt, outcome) VALUES ('gone', 1, 'failed')")
    await conn.execute("ALTER TABLE jobs_completed DETACH PARTITION jobs_completed_start")
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        await partitions.drop_due(pool, 86400, None)
    finally:
        await pool.close()
    assert await conn.fetchval("SELECT to_regclass('jobs_completed_start')") is None
    assert await conn.fetchval("SELECT count(*) FROM job_attempts") == 0


async def test_an_enqueue_through_a_pool_marks_the_ids_it_made(dsn: str, conn: asyncpg.Connection,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """By COPY on a pool's connection, outside a transaction, the mark and the COPY share one of
    their own: the look-up among finished jobs is skipped for ids the enqueue made. Seen by an id
    made to collide on purpose, which only the look-up would have refused."""
    from jobdesk.core import models

    await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('made', 't', '{}', 'completed')")
    made = iter(["made", *(f"m{i}" for i in range(299))])
    monkeypatch.setattr(models, "new_job_id", lambda: next(made))
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as pooled:
            await transitions.enqueue(pooled, [JobCreate("t", {}) for _ in range(300)])
    finally:
        await pool.close()
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id = 'made'") == 2


async def test_a_dropped_partition_cleans_the_tables_a_delete_cleans(conn: asyncpg.Connection) -> None:
    """The tables read from the DELETE trigger's function: every one of them, each by its column."""
    assert sorted(await partitions.child_tables(conn)) == [
        ("job_attempts", "job_id"), ("job_dependencies", "depends_on_id"), ("job_dependencies", "job_id"),
        ("job_logs", "job_id"), ("job_progress", "job_id"), ("job_stack_requests", "job_id"),
        ("job_stacks", "job_id"), ("job_steps", "job_id"), ("job_waits", "job_id")]
