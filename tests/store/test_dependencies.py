"""The dependency counter stays right when children are enqueued while their parents complete."""

from __future__ import annotations

import asyncio

import asyncpg

from jobdesk.core.models import JobCreate
from jobdesk.processors.builtin import EchoProcessor
from jobdesk.store import transitions
from jobdesk.store.db import connect
from tests.helpers import RunningWorker, seq_scans_of_jobs, set_autovacuum, wait_for


async def test_children_enqueued_during_parent_completion_are_released(dsn: str, conn: asyncpg.Connection) -> None:
    parents = [JobCreate("echo", {"p": i}) for i in range(200)]
    await transitions.enqueue(conn, parents)
    worker = RunningWorker(dsn, {"echo": EchoProcessor()})
    enqueuers = [await connect(dsn) for _ in range(3)]

    async def enqueue_children(c: asyncpg.Connection, offset: int) -> None:
        for parent in parents[offset::3]:
            await transitions.enqueue(c, [JobCreate("echo", {"child_of": parent.id},
                                                    dependent_on_jobs=[parent.id])])

    try:
        await asyncio.gather(*(enqueue_children(c, i) for i, c in enumerate(enqueuers)))
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 400 AND bool_and(status = 'completed') FROM jobs"),
                       timeout=60, what="every parent and child to complete")
    finally:
        await worker.stop()
        for c in enqueuers:
            await c.close()
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE pending_deps <> 0") == 0


async def test_blocked_jobs_wait_for_every_dependency(dsn: str, conn: asyncpg.Connection) -> None:
    a, b = JobCreate("echo", {}), JobCreate("never.served", {})
    c = JobCreate("echo", {}, dependent_on_jobs=[a.id, b.id])
    await transitions.enqueue(conn, [a, b, c])
    worker = RunningWorker(dsn, {"echo": EchoProcessor()})
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", a.id),
                       what="a to complete")
        await asyncio.sleep(0.3)
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", c.id) == "queued"
        assert await conn.fetchval("SELECT pending_deps FROM jobs WHERE id = $1", c.id) == 1
    finally:
        await worker.stop()


async def test_a_fan_out_and_its_release_look_jobs_up_by_key(conn: asyncpg.Connection) -> None:
    """Flagging the parents of each job inserted and releasing a completed job's dependants
    joined `jobs` to a list of ids, which the planner did by reading the whole table while it
    thought it small: a pipeline of n jobs read the table n times as it grew."""
    await set_autovacuum(conn, False)
    await conn.execute("INSERT INTO jobs (id, type, input_data) SELECT 'parent-' || g, 'echo', '{}' "
                       "FROM generate_series(1, 10) g")
    before = await seq_scans_of_jobs(conn, conn)
    await conn.execute("INSERT INTO jobs (type, input_data, dependent_on_jobs) "
                       "SELECT 'echo', '{}', jsonb_build_array('parent-' || (g % 10 + 1)) "
                       "FROM generate_series(1, 1000) g")
    await conn.execute("UPDATE jobs SET status = 'completed', completed_at = now() WHERE id = 'parent-1'")
    assert await seq_scans_of_jobs(conn, conn) == before
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE pending_deps = 0 AND type = 'echo' "
                               "AND dependent_on_jobs = '[\"parent-1\"]'") == 100
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE has_dependants") == 10
    assert await conn.fetchval("SELECT count(*) FROM job_dependencies") == 1000
