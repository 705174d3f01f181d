"""A worker whose flow-controlled type is held back holds no slot and does not spin: the jobs
stay queued, the worker's rounds come at the poll interval, and the held jobs start as soon as
the rate allows again."""

from __future__ import annotations

import asyncio

import asyncpg

from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from tests.flow_processors import Nap
from tests.helpers import RunningWorker, wait_for


async def test_jobs_held_by_a_rate_stay_queued_without_a_slot_or_a_busy_loop(conn: asyncpg.Connection,
                                                                            dsn: str) -> None:
    await transitions.enqueue(conn, [JobCreate("flow.rate", {}) for _ in range(6)])
    worker = RunningWorker(dsn, {"flow.rate": Nap()}, JOB_RATE_LIMITS="flow.rate=2/m",
                           JOB_PROCESSOR_POLL_INTERVAL=1.0)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 2 FROM jobs WHERE status = 'completed'"),
                       timeout=30, what="the two starts the rate allows")
        before = worker.worker.stats["rounds"]
        await asyncio.sleep(3)
        rounds = worker.worker.stats["rounds"] - before
        statuses = dict(await conn.fetch("SELECT status, count(*) FROM jobs GROUP BY 1"))
        running = len(worker.worker.execution.running) + len(worker.worker.execution.ready)
    finally:
        await worker.stop()
    assert statuses == {"completed": 2, "queued": 4}
    assert running == 0, "a held job took a slot"
    # Woken by the poll interval (1 s) at most: a busy loop would be thousands of rounds.
    assert rounds <= 3 * 2 + 2, rounds


async def test_held_jobs_start_as_soon_as_the_rate_allows(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await transitions.enqueue(conn, [JobCreate("flow.rate", {}) for _ in range(4)])
    # A poll interval far longer than the rate's period: the held jobs wait for the rate, not the poll.
    worker = RunningWorker(dsn, {"flow.rate": Nap()}, JOB_RATE_LIMITS="flow.rate=2/s", JOB_PROCESSOR_POLL_INTERVAL=30)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 4 FROM jobs WHERE status = 'completed'"),
                       timeout=15, what="the four jobs, well before the 30 s poll interval")
    finally:
        await worker.stop()
    starts = [r["started_at"] for r in await conn.fetch(
        "SELECT started_at FROM jobs WHERE id = ANY($1::text[]) ORDER BY started_at", ids)]
    assert (starts[2] - starts[0]).total_seconds() >= 1, "three starts within one second under 2/s"
    gap = (starts[2] - starts[1]).total_seconds()
    assert gap < 5, f"the third start came {gap:.2f} s after the second"


async def test_jobs_that_end_beside_a_type_with_a_type_limit_are_written(conn: asyncpg.Connection,
                                                                          dsn: str) -> None:
    """A flow-controlled type that also has a JOB_TYPE_LIMITS makes the first pump claim alone
    while the type is claimable, and both pumps while it is held back. Jobs that end together
    and wake the second pump just as the hold runs out must still be written: here every other
    slot holds a long job, so no later end would come to write them."""
    await conn.execute("INSERT INTO users (id, name) SELECT g, 'u' || g FROM generate_series(2, 4) g")
    await transitions.enqueue(conn, [JobCreate("flow.user", {"seconds": 60}, user_id=2 + i % 2) for i in range(6)] +
                              [JobCreate("flow.fair", {"seconds": 60}, user_id=2 + i % 3) for i in range(6)] +
                              [JobCreate("flow.rate", {"seconds": 0.2}) for _ in range(100)])
    naps = {t: Nap() for t in ("flow.user", "flow.fair", "flow.rate")}
    worker = RunningWorker(dsn, naps, MAX_CONCURRENT_JOBS=10, JOB_PROCESSOR_POLL_INTERVAL=0.1, JOB_SHUTDOWN_TIMEOUT=1,
                           JOB_TYPE_LIMITS="flow.user=2", JOB_FAIR_SHARE="flow.user", JOB_USER_LIMITS="flow.fair=1",
                           JOB_RATE_LIMITS="flow.rate=5/s")
    try:
        # 5 slots are left to flow.rate, which starts 5 a second: 30 take about 6 s.
        await wait_for(lambda: conn.fetchval("SELECT count(*) >= 30 FROM jobs WHERE type = 'flow.rate' "
                                             "AND status = 'completed'"), timeout=30,
                       what="30 short jobs beside the long ones")
    finally:
        await worker.stop()
