"""The walk floors against a real worker and a real PostgreSQL: a worker busy with a backlog of
a type walks it from its floor, past the jobs it claimed; a job of that type that comes back
below the floor, by any way a job becomes runnable, is claimed at once.

Each test makes a job L with a low seq that cannot run yet, lets the worker claim a backlog of
the same type with higher seqs (so that its floor passes L), checks that it did, then makes L
runnable one way. The floors are kept for a minute without news here (a second in production),
so only the news of that way can get L claimed within the test's time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.runtime import pump
from jobdesk.store import durable, transitions
from tests.helpers import RunningWorker, wait_for
from tests.pgbouncer import PgBouncer

BACKLOG = 300  # jobs of type t after L: about 1.5 s of work at 2 slots of 5 ms
GHOST = "ghost-worker"  # a worker id for claims the test makes by hand


@pytest.fixture(autouse=True)
def floors_kept_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pump, "FLOORS_KEPT_S", 60.0)


class Work(BaseProcessor):
    """Type t: 5 ms of work; fails the first attempt of a job whose input says so; waits for an
    event whose key the input names."""

    async def process(self, job: Job) -> ProcessorResult:
        if job.input_data.get("fail_once") and job.attempt == 1:
            raise RuntimeError("first attempt fails")
        if "key" in job.input_data:
            return ProcessorResult({"payload": await job.wait_for_event(job.input_data["key"])})
        await asyncio.sleep(0.005)
        return ProcessorResult({})


class Hold(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({}, requires_approval=True)


async def seq_of(conn: asyncpg.Connection, job_id: str) -> int:
    return int(await conn.fetchval("SELECT seq FROM jobs WHERE id = $1", job_id))


async def status_of(conn: asyncpg.Connection, job_id: str) -> str:
    return str(await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id))


async def floor_passes(conn: asyncpg.Connection, worker: RunningWorker, low: int) -> None:
    """Wait until the worker has claimed part of the backlog, and its floor of t is above `low`."""
    await wait_for(lambda: conn.fetchval("SELECT count(*) >= 20 FROM jobs WHERE type = 't' AND status = 'completed'"),
                   what="the backlog under way")

    async def above() -> bool:
        at = worker.worker.pumps.floors.at.get("t")
        return at is not None and at[1] > low

    await wait_for(above, timeout=10, what=f"the floor of t above seq {low}")


async def backlog(conn: asyncpg.Connection) -> None:
    await transitions.enqueue(conn, [JobCreate("t", {"n": i}) for i in range(BACKLOG)])


async def below_the_floor(conn: asyncpg.Connection, dsn: str, low_id: str,
                          make_runnable: Callable[[], Awaitable[object]]) -> RunningWorker:
    """Run the backlog on a worker, make L runnable once the floor is past it, and wait for L."""
    worker = RunningWorker(dsn, {"t": Work()}, MAX_CONCURRENT_JOBS=2)
    try:
        await backlog(conn)
        await floor_passes(conn, worker, await seq_of(conn, low_id))
        await make_runnable()
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", low_id),
                       timeout=8, what="the job below the floor")
    finally:
        await worker.stop()
    return worker


async def claim_as_ghost(conn: asyncpg.Connection, job_id: str) -> None:
    """Claim job L by hand, as another worker would (before the backlog exists)."""
    _, jobs = await transitions.complete_and_claim(conn, GHOST, [await conn.fetchval(
        "SELECT type FROM jobs WHERE id = $1", job_id)], 1)
    assert [j.id for j in jobs] == [job_id]


async def test_a_job_put_back_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1})])
    await claim_as_ghost(conn, low)
    await below_the_floor(conn, dsn, low, lambda: transitions.put_back(conn, GHOST, [low], "stopping"))


async def test_a_claim_given_back_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1})])
    await claim_as_ghost(conn, low)
    await below_the_floor(conn, dsn, low, lambda: transitions.unclaim(conn, GHOST, [low]))


async def test_a_rescued_job_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    """A lost worker's job is taken back (its retry is due at once) by another worker's rescue:
    a retry, claimed as the retries are."""
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1})])
    await claim_as_ghost(conn, low)

    async def rescue() -> None:
        # The ghost is known and stopped from now on: the first rescue takes its job back (this
        # one, or the worker's own supervisor's, whichever runs first).
        await conn.execute("INSERT INTO workers (id, host, pid, concurrency, job_types, version, state)"
                           " VALUES ($1, 'h', 1, 1, '{t}', 'x', 'stopped')", GHOST)
        await transitions.rescue_lost_jobs(conn, "rescuer", 30.0, [0.0])
        assert await conn.fetchval("SELECT error_message FROM jobs WHERE id = $1", low) == "worker lost"

    await below_the_floor(conn, dsn, low, rescue)


async def test_a_retry_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    """L fails its first attempt before the backlog exists; its retry comes while the floor is
    past it. (A job whose retry time comes is claimed from jobs_waiting_idx by the workers of its
    type, or made runnable by another worker, which tells them: see the scheduled job's test.)"""
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"fail_once": True})])
    worker = RunningWorker(dsn, {"t": Work()}, MAX_CONCURRENT_JOBS=2, JOB_RETRY_INTERVALS=[1.5])
    try:
        await wait_for(lambda: conn.fetchval("SELECT retry_count = 1 FROM jobs WHERE id = $1", low),
                       what="the first attempt failed")
        await backlog(conn)
        await floor_passes(conn, worker, await seq_of(conn, low))
        assert await status_of(conn, low) == "queued"
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", low),
                       timeout=8, what="the retry")
    finally:
        await worker.stop()


async def test_a_released_dependant_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    parent = JobCreate("p", {})
    await transitions.enqueue(conn, [parent])
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1}, dependent_on_jobs=[parent.id])])
    await claim_as_ghost(conn, parent.id)
    [job] = await conn.fetch("SELECT id, attempts FROM jobs WHERE id = $1", parent.id)

    async def complete_parent() -> None:
        claimed = Job(parent.id, "p", {}, None, None, 0, job["attempts"], 0)
        written, _ = await transitions.complete_and_claim(conn, GHOST, [], 0, [(claimed, ProcessorResult({}))])
        assert written == {parent.id}

    await below_the_floor(conn, dsn, low, complete_parent)


async def test_a_dependant_released_by_an_approval_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    held = JobCreate("hold", {})
    await transitions.enqueue(conn, [held])
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1}, dependent_on_jobs=[held.id])])
    worker = RunningWorker(dsn, {"t": Work(), "hold": Hold()}, MAX_CONCURRENT_JOBS=2)
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'waiting_approval' FROM jobs WHERE id = $1", held.id),
                       what="the job held for approval")
        await backlog(conn)
        await floor_passes(conn, worker, await seq_of(conn, low))
        await transitions.approve(conn, [held.id], transitions.Actor("api", "tester"))
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", low),
                       timeout=8, what="the dependant of the approved job")
    finally:
        await worker.stop()


async def test_a_woken_durable_job_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"key": "go"})])
    worker = RunningWorker(dsn, {"t": Work()}, MAX_CONCURRENT_JOBS=2)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM job_waits WHERE event_key = 'go'"),
                       what="the wait for the event")
        await backlog(conn)
        await floor_passes(conn, worker, await seq_of(conn, low))
        await durable.emit_event(conn, "go", {"ok": True})
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", low),
                       timeout=8, what="the woken job")
    finally:
        await worker.stop()


async def test_a_debounced_job_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    """A debounced job's start moves with each enqueue of its key; it runs once the moves stop
    (a job whose time comes, claimed as the retries are)."""
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1}, unique_key="d", debounce=1.0)])
    worker = RunningWorker(dsn, {"t": Work()}, MAX_CONCURRENT_JOBS=2)
    try:
        await backlog(conn)
        await floor_passes(conn, worker, await seq_of(conn, low))
        assert await transitions.enqueue(conn, [JobCreate("t", {"n": -1}, unique_key="d", debounce=0.2)]) == [low]
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", low),
                       timeout=8, what="the debounced job")
    finally:
        await worker.stop()


async def test_a_scheduled_job_made_runnable_by_another_worker_below_the_floor(
        conn: asyncpg.Connection, dsn: str) -> None:
    """L's time comes, and a worker that does not serve t makes it runnable (run_at cleared) in
    its claim: it is then in the ready index below the floor, and that claim tells the others.
    (The time is moved to now in the same transaction as that claim, so that the worker of t,
    which takes its due jobs itself, does not see it first.)"""
    later = datetime.now(UTC) + timedelta(hours=1)
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1}, scheduled_at=later)])

    async def due_and_made_runnable() -> None:
        async with conn.transaction():
            await conn.execute("UPDATE jobs SET run_at = now() - interval '1 second' WHERE id = $1", low)
            _, jobs = await transitions.complete_and_claim(conn, GHOST, ["other"], 1)
            assert jobs == []
        assert await conn.fetchval("SELECT run_at IS NULL FROM jobs WHERE id = $1", low)

    await below_the_floor(conn, dsn, low, due_and_made_runnable)


async def test_an_enqueue_that_commits_late_below_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    """L's seq is taken when it is inserted, before the backlog's; it is seen when its
    transaction commits, after the worker claimed past it."""
    late = await asyncpg.connect(dsn)
    try:
        tx = late.transaction()
        await tx.start()
        [low] = await transitions.enqueue(late, [JobCreate("t", {"n": -1})])
        low_seq = await late.fetchval("SELECT seq FROM jobs WHERE id = $1", low)
        worker = RunningWorker(dsn, {"t": Work()}, MAX_CONCURRENT_JOBS=2)
        try:
            await backlog(conn)
            await floor_passes(conn, worker, low_seq)
            await tx.commit()
            await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", low),
                           timeout=8, what="the job of the late commit")
        finally:
            await worker.stop()
    finally:
        await late.close()


async def test_a_higher_priority_job_enqueued_above_the_floor(conn: asyncpg.Connection, dsn: str) -> None:
    """A new job of a higher priority comes before the floor in walk order: it is claimed next."""
    worker = RunningWorker(dsn, {"t": Work()}, MAX_CONCURRENT_JOBS=2)
    try:
        await backlog(conn)
        await floor_passes(conn, worker, 0)
        [urgent] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1}, priority=5)])
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", urgent),
                       timeout=8, what="the urgent job")
        left = await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 't' AND status = 'queued'")
    finally:
        await worker.stop()
    assert left > 0, "the urgent job ran before the backlog was done"


async def test_behind_a_pooler_the_floors_are_cleared_before_every_round(
        conn: asyncpg.Connection, dsn: str, pgbouncer: PgBouncer) -> None:
    """Without LISTEN no news is heard: a job put back below the floor is found all the same."""
    [low] = await transitions.enqueue(conn, [JobCreate("t", {"n": -1})])
    await claim_as_ghost(conn, low)
    worker = await below_the_floor(conn, pgbouncer.url(dsn, declared=False), low,
                                   lambda: transitions.put_back(conn, GHOST, [low], "stopping"))
    assert not worker.worker.pumps.hearing()


async def test_new_jobs_above_the_floor_leave_it_in_place(conn: asyncpg.Connection, dsn: str) -> None:
    """New jobs say how low they go (sql/031): jobs enqueued while the backlog runs, each after
    it, lower no floor, so the walks keep starting past the claimed jobs under a trickle."""
    worker = RunningWorker(dsn, {"t": Work()}, MAX_CONCURRENT_JOBS=2)
    try:
        await backlog(conn)
        await floor_passes(conn, worker, 0)
        floors = worker.worker.pumps.floors
        clears = floors.clears
        for i in range(10):
            await transitions.enqueue(conn, [JobCreate("t", {"n": BACKLOG + i})])
            await asyncio.sleep(0.05)
        assert floors.clears == clears, "the floors were cleared by news of jobs above them"
        assert await conn.fetchval("SELECT count(*) > 0 FROM jobs WHERE status = 'queued'"), "the backlog ran out"
    finally:
        await worker.stop()
