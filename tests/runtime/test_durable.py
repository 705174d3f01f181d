"""Durable processors on a real PostgreSQL: steps that are never redone, sleeps that hold no
slot, events emitted before or after the wait, child jobs, cancel while suspended."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest
from prometheus_client import generate_latest

from jobdesk.core.models import JobCreate
from jobdesk.store import durable, transitions
from tests.durable_processors import PROCESSOR_MAP
from tests.helpers import RunningWorker, wait_for

PROCESSORS = {name: cls() for name, cls in PROCESSOR_MAP.items()}


async def status_of(conn: asyncpg.Connection, job_id: str) -> str:
    return await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)


async def ended(conn: asyncpg.Connection, *ids: str, status: str = "completed") -> bool:
    n = await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = $2", list(ids), status)
    return n == len(ids)


async def result(conn: asyncpg.Connection, job_id: str) -> Any:
    return await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1", job_id)


@pytest.fixture
async def calls(conn: asyncpg.Connection) -> asyncpg.Connection:
    await conn.execute("CREATE TABLE step_calls (job_id text, step text, at timestamptz DEFAULT clock_timestamp())")
    return conn


async def test_steps_are_stored_and_returned_on_a_rerun(calls: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(calls, [JobCreate("durable.three_steps", {"dsn": dsn})])
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: ended(calls, job_id), what="the job")
        assert (await result(calls, job_id)) == {"steps": [1, {"two": 2}, 3]}
        steps = await durable.steps_of(calls, job_id)
        assert [s.name for s in steps] == ["one", "two", "three"]
        assert [s.result for s in steps] == [1, {"two": 2}, [1, {"two": 2}, 3]]
    finally:
        await worker.stop()


async def test_the_same_step_name_twice_fails_the_attempt_naming_it(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("durable.twice", {})])
    worker = RunningWorker(dsn, PROCESSORS, JOB_RETRY_INTERVALS=[])
    try:
        await wait_for(lambda: ended(conn, job_id, status="failed"), what="the failure")
    finally:
        await worker.stop()
    message = await conn.fetchval("SELECT error_message FROM jobs WHERE id = $1", job_id)
    assert "step 'a' is used twice" in message


async def test_sleeps_hold_no_slot(conn: asyncpg.Connection, dsn: str) -> None:
    """200 jobs that each sleep 2 s, on 2 slots: about 2 s plus the time to run them, not 200 s."""
    jobs = [JobCreate("durable.sleep", {"seconds": 2}) for _ in range(200)]
    ids = await transitions.enqueue(conn, jobs)
    began = time.monotonic()
    worker = RunningWorker(dsn, PROCESSORS, MAX_CONCURRENT_JOBS=2, JOB_METRICS_PORT=0)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 200 FROM job_waits"), timeout=30,
                       what="every job suspended")
        suspended_after = time.monotonic() - began
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued'") >= 150, \
            "sleeping jobs stay queued"
        await wait_for(lambda: ended(conn, *ids), timeout=60, what="every job")
        took = time.monotonic() - began
        metrics = worker.worker.metrics
    finally:
        await worker.stop()
    assert took < suspended_after + 2 + 15, f"200 sleeps of 2 s on 2 slots took {took:.1f} s"
    attempts = await conn.fetchval("SELECT count(*) FROM job_attempts WHERE outcome = 'suspended'")
    assert attempts == 200
    assert await conn.fetchval("SELECT max(retry_count) FROM jobs") == 0, "a suspension spends no retry"
    assert metrics is not None
    assert metrics.of("durable.sleep").suspended == 200 and metrics.of("durable.sleep").woken == 200
    scraped = generate_latest(metrics.registry()).decode()
    assert 'jobdesk_jobs_suspended_total{type="durable.sleep"} 200.0' in scraped
    assert 'jobdesk_jobs_woken_total{type="durable.sleep"} 200.0' in scraped


async def test_events_before_and_after_the_wait_and_two_waiters(conn: asyncpg.Connection, dsn: str) -> None:
    early = await durable.emit_event(conn, "early", {"n": 1})
    assert early is True
    assert await durable.emit_event(conn, "early", {"n": 2}) is False, "the first emit of a key wins"
    ids = await transitions.enqueue(conn, [JobCreate("durable.wait", {"key": "early"}),
                                           JobCreate("durable.wait", {"key": "late"}),
                                           JobCreate("durable.wait", {"key": "late"}),
                                           JobCreate("durable.wait", {"key": "never", "timeout": 0.5})])
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: ended(conn, ids[0]), what="the wait for an event emitted before it")
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 2 FROM job_waits WHERE event_key = 'late'"),
                       what="two jobs waiting on one key")
        wait = await durable.wait_of(conn, ids[1])
        assert wait is not None and wait.kind == "event" and wait.event_key == "late" and wait.until is None
        await conn.execute("INSERT INTO job_events (key, payload) VALUES ('late', '{\"from\": \"sql\"}')")
        await wait_for(lambda: ended(conn, ids[1], ids[2]), what="both waiters woken")
        await wait_for(lambda: ended(conn, ids[3]), what="the timeout")
    finally:
        await worker.stop()
    assert await result(conn, ids[0]) == {"payload": {"n": 1}}
    assert await result(conn, ids[1]) == {"payload": {"from": "sql"}}
    assert await result(conn, ids[2]) == {"payload": {"from": "sql"}}
    assert await result(conn, ids[3]) == {"timed_out": True}


async def test_spawn_and_wait_for_children_one_failing(conn: asyncpg.Connection, dsn: str) -> None:
    [parent] = await transitions.enqueue(conn, [JobCreate("durable.parent", {})])
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: ended(conn, parent), what="the parent")
    finally:
        await worker.stop()
    out = await result(conn, parent)
    assert out["statuses"] == ["completed", "failed", "completed"], "a failed child does not fail the parent"
    children = await conn.fetch("SELECT id, spawned_by, pipeline_id FROM jobs WHERE type = 'durable.child'")
    assert len(children) == 3, "a rerun of the parent spawns nothing again"
    assert {c["spawned_by"] for c in children} == {parent}
    assert {c["pipeline_id"] for c in children} == {parent}
    assert await conn.fetchval("SELECT attempts FROM jobs WHERE id = $1", parent) >= 2, "the parent ran again"


async def test_cancel_while_sleeping(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("durable.sleep", {"seconds": 1.5})])
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM job_waits"), what="the sleep")
        assert await status_of(conn, job_id) == "queued"
        cancelled = await transitions.cancel(conn, [job_id], transitions.Actor("test"))
        assert cancelled == [job_id]
        assert await status_of(conn, job_id) == "cancelled", "cancelled at once"
        await asyncio.sleep(2.5)
    finally:
        await worker.stop()
    assert await status_of(conn, job_id) == "cancelled", "a job cancelled while suspended never wakes"
    assert await conn.fetchval("SELECT attempts FROM jobs WHERE id = $1", job_id) == 1


async def test_a_step_a_sleep_and_a_wait_then_approval(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("durable.approval", {})])
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM job_waits WHERE event_key = $1",
                                             f"checked:{job_id}"), what="the wait for the event")
        await durable.emit_event(conn, f"checked:{job_id}", "ok")
        await wait_for(lambda: ended(conn, job_id, status="waiting_approval"), what="the approval")
        attempts = await conn.fetchval("SELECT attempts FROM jobs WHERE id = $1", job_id)
        assert await transitions.approve(conn, [job_id], transitions.Actor("test")) == [job_id]
        await wait_for(lambda: ended(conn, job_id), what="the approved job")
    finally:
        await worker.stop()
    assert await result(conn, job_id) == {"made": {"draft": 1}, "checked": "ok"}
    assert await conn.fetchval("SELECT attempts FROM jobs WHERE id = $1", job_id) == attempts == 3, \
        "approval ran nothing again"


async def test_a_wait_for_jobs_it_did_not_spawn_ends_too(conn: asyncpg.Connection, dsn: str) -> None:
    [other] = await transitions.enqueue(conn, [JobCreate("durable.child", {"n": 7, "seconds": 1.0})])
    [waiter] = await transitions.enqueue(conn, [JobCreate("durable.wait_others", {"ids": [other]})])
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: ended(conn, waiter), what="the waiter")
    finally:
        await worker.stop()
    assert await result(conn, waiter) == {"statuses": ["completed"]}


async def test_durable_jobs_of_flow_controlled_types(conn: asyncpg.Connection, dsn: str) -> None:
    """A sleep and a wait for an event end as well when their types are claimed under flow
    control (a rate limit, fair share), which takes them apart from the other types."""
    await conn.execute("INSERT INTO users (id, name) VALUES (2, 'b') ON CONFLICT DO NOTHING")
    ids = await transitions.enqueue(conn, [JobCreate("durable.sleep", {"seconds": 0.5}, user_id=u) for u in (1, 2)]
                                    + [JobCreate("durable.wait", {"key": "flow"})])
    worker = RunningWorker(dsn, PROCESSORS, JOB_RATE_LIMITS="durable.sleep=50/s", JOB_FAIR_SHARE="durable.wait")
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM job_waits WHERE event_key = 'flow'"),
                       what="the wait")
        await durable.emit_event(conn, "flow", {"ok": True})
        await wait_for(lambda: ended(conn, *ids), what="the sleeps and the wait")
    finally:
        await worker.stop()
    assert await result(conn, ids[2]) == {"payload": {"ok": True}}
