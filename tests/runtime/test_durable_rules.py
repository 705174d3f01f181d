"""Durable processors on a real PostgreSQL, the rules beside the main cases: a step that raised
runs again and the steps before it do not, sleeps and timeouts given as a timedelta or a
datetime, a cancel of a job waiting for an event, and how soon a sleeping job runs again."""

from __future__ import annotations

import asyncio
from datetime import datetime

import asyncpg

from jobdesk.core.models import JobCreate
from jobdesk.store import durable, transitions
from tests.durable_processors import PROCESSOR_MAP
from tests.helpers import RunningWorker, wait_for

PROCESSORS = {name: cls() for name, cls in PROCESSOR_MAP.items()}
POLL_S = 0.2
# How late a wake may be on top of the poll interval in a test (the target is 50 ms on an idle
# machine; a loaded 2-core machine gets slack, and a wake left to the lease or to a slow poll
# would still miss this by seconds).
SLACK_S = 1.5


async def ended(conn: asyncpg.Connection, *ids: str, status: str = "completed") -> bool:
    n = await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = $2", list(ids), status)
    return n == len(ids)


async def run_until_completed(conn: asyncpg.Connection, dsn: str, job_id: str, what: str,
                              timeout: float = 20.0) -> None:
    """A worker of the durable processors runs until the job has completed, then stops."""
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: ended(conn, job_id), timeout=timeout, what=what)
    finally:
        await worker.stop()


async def test_a_step_that_raised_runs_again_and_the_steps_before_it_do_not(conn: asyncpg.Connection,
                                                                             dsn: str) -> None:
    await conn.execute("CREATE TABLE step_calls (job_id text, step text, at timestamptz DEFAULT clock_timestamp())")
    [job_id] = await transitions.enqueue(conn, [JobCreate("durable.fails_once", {"dsn": dsn})])
    await run_until_completed(conn, dsn, job_id, "the job")
    rows = await conn.fetch("SELECT step, count(*) AS n FROM step_calls GROUP BY step")
    assert {r["step"]: r["n"] for r in rows} == {"one": 1, "two": 2}
    row = await conn.fetchrow("SELECT result_data, retry_count, attempts FROM jobs WHERE id = $1", job_id)
    assert row["result_data"] == {"got": ["a", "b"]} and row["retry_count"] == 1 and row["attempts"] == 2
    steps = await durable.steps_of(conn, job_id)
    assert [(s.name, s.attempt) for s in steps] == [("one", 1), ("two", 2)], "the raised step stored nothing"
    failed = await conn.fetchval("SELECT error_message FROM job_attempts WHERE job_id = $1 AND attempt = 1", job_id)
    assert "step two fails on the first attempt" in failed


async def test_timedelta_sleeps_sleep_until_and_a_timedelta_timeout(conn: asyncpg.Connection, dsn: str) -> None:
    """The wait times out, the processor emits the event and sleeps: the rerun after the sleep
    finds the wait timed out again (its stored checkpoint), not the event emitted since."""
    [job_id] = await transitions.enqueue(conn, [JobCreate("durable.timed", {"key": "never-emitted"})])
    await run_until_completed(conn, dsn, job_id, "the job")
    assert await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1", job_id) == {"timed_out": "never-emitted"}
    steps = {s.name: s.result for s in await durable.steps_of(conn, job_id)}
    assert set(steps) == {"@sleep 1", "@sleep 2", "@event 1", "@sleep 3"}
    assert steps["@event 1"]["timed_out"] is True, "the timeout is stored"  # type: ignore[index,call-overload]
    outcomes = [r["outcome"] for r in await conn.fetch(
        "SELECT outcome FROM job_attempts WHERE job_id = $1 ORDER BY attempt", job_id)]
    assert outcomes == ["suspended"] * 4, "each sleep and the wait suspended the job once"
    assert await conn.fetchval("SELECT retry_count FROM jobs WHERE id = $1", job_id) == 0


async def test_a_wait_for_child_jobs_that_timed_out_stays_timed_out(conn: asyncpg.Connection, dsn: str) -> None:
    [parent] = await transitions.enqueue(conn, [JobCreate("durable.parent_times_out", {})])
    await run_until_completed(conn, dsn, parent, "the parent", timeout=60)
    assert await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1", parent) == {"timed_out": True}
    steps = {s.name: s.result for s in await durable.steps_of(conn, parent)}
    pending = steps["pending"]
    assert isinstance(pending, list) and len(pending) == 2 and set(pending) <= {"queued", "in_progress"}, \
        "JobWaitTimeout.statuses gave each child's status"
    assert steps["@wait-jobs 1"]["timed_out"] is True  # type: ignore[index,call-overload]
    children = await conn.fetch("SELECT status FROM jobs WHERE spawned_by = $1", parent)
    assert [c["status"] for c in children] == ["completed", "completed"], "they had ended before the rerun"


async def test_spawned_children_join_the_parents_pipeline(conn: asyncpg.Connection, dsn: str) -> None:
    parent_job = JobCreate("durable.parent", {})
    parent_job.pipeline_id = "pipe-1"
    [parent] = await transitions.enqueue(conn, [parent_job])
    await run_until_completed(conn, dsn, parent, "the parent")
    rows = await conn.fetch("SELECT pipeline_id, spawned_by FROM jobs WHERE type = 'durable.child'")
    assert [(r["pipeline_id"], r["spawned_by"]) for r in rows] == [("pipe-1", parent)] * 3


async def test_cancel_while_waiting_for_an_event(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("durable.wait", {"key": "cancel-me"})])
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM job_waits WHERE event_key = 'cancel-me'"),
                       what="the wait")
        assert await transitions.cancel(conn, [job_id], transitions.Actor("test")) == [job_id]
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "cancelled", "at once"
        assert await durable.emit_event(conn, "cancel-me", {"late": True}) is True
        await asyncio.sleep(1.5)  # a woken job would be claimed within the poll interval
    finally:
        await worker.stop()
    row = await conn.fetchrow("SELECT status, attempts, result_data FROM jobs WHERE id = $1", job_id)
    assert (row["status"], row["attempts"], row["result_data"]) == ("cancelled", 1, None), "it never woke"


async def woke_late_by(conn: asyncpg.Connection, job_id: str) -> float:
    """Seconds from the wake time the job's sleep stored to the moment its sleep returned."""
    [step] = [s for s in await durable.steps_of(conn, job_id) if s.name == "@sleep 1"]
    until = datetime.fromisoformat(step.result["until"])  # type: ignore[index,call-overload,arg-type]
    woke = datetime.fromisoformat((await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1", job_id))["woke"])
    return (woke - until).total_seconds()


async def test_a_sleeping_job_runs_again_when_its_time_comes(conn: asyncpg.Connection, dsn: str) -> None:
    """On the worker that suspended it (its own timer), and on another worker, which finds it
    by its poll: either way within JOB_PROCESSOR_POLL_INTERVAL of the wake time, with slack."""
    [own] = await transitions.enqueue(conn, [JobCreate("durable.stamp", {"seconds": 1.0})])
    worker = RunningWorker(dsn, PROCESSORS, JOB_PROCESSOR_POLL_INTERVAL=POLL_S)
    try:
        await wait_for(lambda: ended(conn, own), what="the sleep on the worker that suspended it")
    finally:
        await worker.stop()
    [other] = await transitions.enqueue(conn, [JobCreate("durable.stamp", {"seconds": 3.0})])
    first = RunningWorker(dsn, PROCESSORS, JOB_PROCESSOR_POLL_INTERVAL=POLL_S)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM job_waits WHERE job_id = $1", other),
                       what="the second sleep")
    finally:
        await first.stop()
    second = RunningWorker(dsn, PROCESSORS, JOB_PROCESSOR_POLL_INTERVAL=POLL_S)
    try:
        await wait_for(lambda: ended(conn, other), what="the sleep on another worker")
    finally:
        await second.stop()
    for job_id, where in ((own, "the same worker"), (other, "another worker")):
        late = await woke_late_by(conn, job_id)
        assert -0.01 <= late < POLL_S + SLACK_S, f"on {where}, the sleep returned {late:.3f} s after its wake time"
