"""A worker whose flow-controlled type is held back holds no slot and does not spin: the jobs
stay queued, the worker's rounds come at the poll interval, and the held jobs start as soon as
the rate allows again."""

from __future__ import annotations

import asyncio

import asyncpg

from tests.flow_processors import Nap
from tests.helpers import RunningWorker, wait_for
from worker.core.models import JobCreate
from worker.store import transitions


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
