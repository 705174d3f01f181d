"""Concurrency limits per type: JOB_TYPE_LIMITS across workers, and one worker's --limit."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from jobdesk.core.errors import SettingsError
from jobdesk.core.limits import ClaimLimits
from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.settings import load_settings
from jobdesk.store import transitions
from jobdesk.store.db import connect
from tests.helpers import RecordsStarts, RunningWorker, run_cli, wait_for


class Sleeps(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        await asyncio.sleep(0.2)
        return ProcessorResult({})


async def sample_max(dsn: str, job_type: str, stop: asyncio.Event) -> int:
    """The most jobs of the type seen in progress at once, sampled every 20 ms on its own connection."""
    conn = await connect(dsn)
    seen = 0
    try:
        while not stop.is_set():
            seen = max(seen, await conn.fetchval(
                "SELECT count(*) FROM jobs WHERE type = $1 AND status = 'in_progress'", job_type))
            await asyncio.sleep(0.02)
    finally:
        await conn.close()
    return seen


async def test_three_workers_never_run_more_than_the_limit(conn: asyncpg.Connection, dsn: str) -> None:
    await transitions.enqueue(conn, [JobCreate("render", {}) for _ in range(20)])
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_max(dsn, "render", stop))
    workers = [RunningWorker(dsn, {"render": Sleeps()}, JOB_TYPE_LIMITS="render=2", MAX_CONCURRENT_JOBS=5)
               for _ in range(3)]
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 20 FROM jobs WHERE status = 'completed'"),
                       timeout=30, what="the 20 jobs")
    finally:
        stop.set()
        for w in workers:
            await w.stop()
    assert await sampler == 2
    assert await conn.fetchval("SELECT max_running FROM type_limits WHERE type = 'render'") == 2


async def test_a_worker_without_the_setting_respects_the_stored_limit(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO type_limits (type, max_running) VALUES ('render', 1)")
    await transitions.enqueue(conn, [JobCreate("render", {}) for _ in range(6)] +
                              [JobCreate("free", {}) for _ in range(6)])
    stop = asyncio.Event()
    limited = asyncio.create_task(sample_max(dsn, "render", stop))
    free = asyncio.create_task(sample_max(dsn, "free", stop))
    worker = RunningWorker(dsn, {"render": Sleeps(), "free": Sleeps()}, MAX_CONCURRENT_JOBS=10)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 12 FROM jobs WHERE status = 'completed'"),
                       timeout=30, what="the jobs")
    finally:
        stop.set()
        await worker.stop()
    assert await limited == 1
    assert await free > 1  # an unlimited type beside it is not held back


async def test_a_workers_own_cap(conn: asyncpg.Connection, dsn: str) -> None:
    from jobdesk.runtime.worker import Worker

    await transitions.enqueue(conn, [JobCreate("render", {}) for _ in range(8)])
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_max(dsn, "render", stop))
    worker = Worker(load_settings(DATABASE_URL=dsn, JOB_PROCESSOR_POLL_INTERVAL=0.05), dsn,
                    {"render": Sleeps()}, type_caps={"render": 3})
    task = asyncio.create_task(worker.run())
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 8 FROM jobs WHERE status = 'completed'"),
                       timeout=30, what="the jobs")
    finally:
        stop.set()
        worker.request_stop()
        await asyncio.wait_for(task, 30)
    assert await sampler == 3


async def test_held_jobs_stay_queued_and_the_claim_takes_only_the_room(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO type_limits (type, max_running) VALUES ('render', 2)")
    await transitions.enqueue(conn, [JobCreate("render", {}) for _ in range(5)] + [JobCreate("free", {})])
    limits = ClaimLimits(fleet=frozenset({"render"}))
    _, first = await transitions.complete_and_claim(conn, "w1", ["render", "free"], 10, (), limits)
    assert sorted(j.type for j in first) == ["free", "render", "render"]
    _, second = await transitions.complete_and_claim(conn, "w2", ["render"], 10, (), limits)
    assert second == []
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'render' AND status = 'queued'") == 3


def test_malformed_limits_are_one_line(dsn: str) -> None:
    with pytest.raises(SettingsError, match="JOB_TYPE_LIMITS"):
        load_settings(JOB_TYPE_LIMITS="video.render=two")
    done = run_cli("worker", "--limit", "render", dsn=dsn)
    assert done.returncode == 2 and "--limit" in done.stderr and "Traceback" not in done.stderr
    done = run_cli("jobs", dsn=dsn, JOB_TYPE_LIMITS="render=0")
    assert done.returncode == 1 and "JOB_TYPE_LIMITS" in done.stderr and "Traceback" not in done.stderr


async def test_unlimited_types_are_still_claimed_while_a_limited_one_is_busy(conn: asyncpg.Connection,
                                                                             dsn: str) -> None:
    """A worker busy with a limited type leaves its idle unlimited types out of its rounds, but
    a new job of theirs, announced or only come due, still starts promptly."""
    poll = 0.2
    stamps = RecordsStarts()
    await transitions.enqueue(conn, [JobCreate("limited", {}) for _ in range(60)])
    worker = RunningWorker(dsn, {"limited": Sleeps(), "free": stamps}, JOB_TYPE_LIMITS={"limited": 4},
                           JOB_PROCESSOR_POLL_INTERVAL=poll)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 4 FROM jobs WHERE status = 'in_progress'"),
                       what="the limited type to fill its room")
        announced = JobCreate("free", {})
        await transitions.enqueue(conn, [announced])
        due = await conn.fetchval("SELECT now() + interval '0.6 seconds'")
        later = JobCreate("free", {}, scheduled_at=due)
        await transitions.enqueue(conn, [later])  # announced now, due later: it wakes nobody when due
        await wait_for(lambda: asyncio.sleep(0.02, later.id in stamps.starts), timeout=10,
                       what="the scheduled job of the unlimited type")
        assert announced.id in stamps.starts
        late = stamps.starts[later.id] - due.timestamp()
        assert -0.01 <= late <= poll + 0.3, late  # within the poll interval of its time (loaded machine: +0.3 s)
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'limited' AND status = 'completed'") < 60
    finally:
        await worker.stop()


async def test_claims_of_a_limited_type_take_turns(conn: asyncpg.Connection, dsn: str) -> None:
    """A claim of a limited type holds the type's lock until it commits: another claim of the
    type waits for it, then counts the first one's jobs."""
    await conn.execute("INSERT INTO type_limits (type, max_running) VALUES ('t', 3)")
    await transitions.enqueue(conn, [JobCreate("t", {}) for _ in range(6)])
    other = await connect(dsn)
    limits = ClaimLimits(fleet=frozenset({"t"}))
    try:
        async with conn.transaction():
            _, first = await transitions.complete_and_claim(conn, "w1", ["t"], 2, limits=limits)
            assert len(first) == 2
            second = asyncio.ensure_future(transitions.complete_and_claim(other, "w2", ["t"], 3, limits=limits))
            await asyncio.sleep(0.3)
            assert not second.done(), "the second claim waits for the first to commit"
        _, more = await asyncio.wait_for(second, 5)
        assert len(more) == 1, "the room left once the first claim's 2 count"
    finally:
        await other.close()
