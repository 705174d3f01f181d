"""Blocking code in jobs: a plain `def` processor runs in a thread, a plain step function too,
`executor = "process"` runs in a separate process, `job.cancelled` reaches all three, and the
loop's watchdog names a processor that blocks it, once."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.errors import ProcessorLoadError
from jobdesk.core.models import JobCreate
from jobdesk.core.processor import BaseProcessor, SyncProcessor, executor_of
from jobdesk.runtime.registry import instantiate
from jobdesk.store import transitions
from tests.helpers import RunningWorker, wait_for
from tests.pgbouncer import PgBouncer
from tests.runtime import offloop_processors as procs


async def _rows(conn: asyncpg.Connection, *ids: str) -> dict[str, asyncpg.Record]:
    rows = await conn.fetch("SELECT id, status, result_data, error_message, attempts FROM jobs "
                            "WHERE id = ANY($1::text[])", list(ids))
    return {r["id"]: r for r in rows}


async def _all(conn: asyncpg.Connection, ids: list[str], status: str = "completed") -> bool:
    rows = await _rows(conn, *ids)
    return len(rows) == len(ids) and all(r["status"] == status for r in rows.values())


def test_the_executor_follows_from_process_unless_set() -> None:
    assert executor_of(procs.Ticks) == "async"
    assert executor_of(procs.SleepsInThread()) == "thread"
    assert executor_of(procs.Computes) == "process"

    class Odd(BaseProcessor):
        executor = "fiber"  # type: ignore[assignment]

    with pytest.raises(ProcessorLoadError, match="Odd.executor is 'fiber'; use one of 'async', 'thread', 'process'"):
        instantiate({"odd": Odd})


async def test_ten_sleeping_sync_jobs_run_at_once_beside_an_async_job(conn: asyncpg.Connection, dsn: str) -> None:
    sleepers = [JobCreate("sleep.sync", {"seconds": 1}) for _ in range(10)]
    ticker = JobCreate("ticks", {"seconds": 1.5})
    worker = RunningWorker(dsn, {"sleep.sync": procs.SleepsInThread(), "ticks": procs.Ticks()},
                           MAX_CONCURRENT_JOBS=11, JOB_HEARTBEAT_INTERVAL=0.2)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) FROM workers WHERE state = 'running'"),
                       what="the worker to register")
        beat_before = await conn.fetchval("SELECT heartbeat_at FROM workers")
        started = time.monotonic()
        ids = await transitions.enqueue(conn, [*sleepers, ticker])
        await wait_for(lambda: _all(conn, ids), what="every job to complete")
        took = time.monotonic() - started
        beat_after = await conn.fetchval("SELECT heartbeat_at FROM workers")
    finally:
        await worker.stop()
    # One after the other they would take 10 s or more; the bound is generous for a loaded machine.
    assert took < 5, f"ten 1 s sleeps took {took:.1f} s"
    rows = await _rows(conn, *ids)
    threads = {rows[j.id]["result_data"]["thread"] for j in sleepers}
    assert len(threads) == 10 and all(t.startswith("jobdesk-job") for t in threads)
    # 1.5 s of 50 ms ticks is 30 on a free loop; a loop blocked by the sleeps would give a handful.
    assert rows[ticker.id]["result_data"]["ticks"] >= 15
    assert beat_after > beat_before  # the heartbeat went on meanwhile


async def test_a_sync_processor_uses_the_job_api_from_its_thread(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("uses.job", {})])
    worker = RunningWorker(dsn, {"uses.job": procs.UsesJobFromThread()})
    try:
        await wait_for(lambda: _all(conn, [job_id]), what="the job to complete")
    finally:
        await worker.stop()
    result = (await _rows(conn, job_id))[job_id]["result_data"]
    assert result["sum"] == 5 and result["id_seen"] == job_id and result["attempt_seen"] == 1
    assert result["thread"].startswith("jobdesk-job") and result["step_thread"].startswith("jobdesk-job")
    steps = await conn.fetch("SELECT name FROM job_steps WHERE job_id = $1 ORDER BY name", job_id)
    assert [s["name"] for s in steps] == ["add", "where"]


async def test_a_sync_processor_suspends_its_job_from_its_thread(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("sleeps.durably", {})])
    worker = RunningWorker(dsn, {"sleeps.durably": procs.SleepsDurablyFromThread()})
    try:
        await wait_for(lambda: _all(conn, [job_id]), what="the job to complete")
    finally:
        await worker.stop()
    assert (await _rows(conn, job_id))[job_id]["result_data"]["slept"] >= 0.29
    outcomes = await conn.fetch("SELECT outcome FROM job_attempts WHERE job_id = $1", job_id)
    assert [r["outcome"] for r in outcomes] == ["suspended"]


async def test_a_plain_step_function_runs_off_the_loop(conn: asyncpg.Connection, dsn: str) -> None:
    stepper = JobCreate("step.sync", {"seconds": 1})
    ticker = JobCreate("ticks", {"seconds": 1.5})
    worker = RunningWorker(dsn, {"step.sync": procs.AsyncWithSyncStep(), "ticks": procs.Ticks()})
    try:
        ids = await transitions.enqueue(conn, [stepper, ticker])
        await wait_for(lambda: _all(conn, ids), what="both jobs to complete")
    finally:
        await worker.stop()
    rows = await _rows(conn, *ids)
    assert rows[stepper.id]["result_data"]["loop_thread"] == threading.current_thread().name
    assert rows[stepper.id]["result_data"]["step_thread"].startswith("jobdesk-job")
    assert rows[ticker.id]["result_data"]["ticks"] >= 15


@pytest.mark.parametrize("processor", [procs.WaitsForCancel, procs.AsyncWaitsForCancel,
                                       procs.WaitsForCancelInProcess])
async def test_job_cancelled_turns_true_in_every_executor(conn: asyncpg.Connection, dsn: str, tmp_path: Path,
                                                          processor: type[BaseProcessor | SyncProcessor]) -> None:
    flag = tmp_path / "flag"
    job = JobCreate("waits", {"flag": str(flag), "runs": str(tmp_path / "runs")})
    await transitions.enqueue(conn, [job])
    worker = RunningWorker(dsn, {"waits": processor()})
    try:
        await wait_for(lambda: _all(conn, [job.id], "in_progress"), what="the job to start")
        await wait_for(lambda: _exists(tmp_path / "runs"), what="the processor to run")
        await transitions.cancel(conn, [job.id], transitions.Actor("api", "tester"))
        await wait_for(lambda: _all(conn, [job.id], "cancelled"), what="the cancellation")
        await wait_for(lambda: _exists(flag), what="the processor to see job.cancelled")
    finally:
        await worker.stop()
    assert flag.read_text() == "cancelled"
    run_pid = int((tmp_path / "runs").read_text().split()[2])
    assert (run_pid != os.getpid()) == (processor is procs.WaitsForCancelInProcess)


async def test_job_cancelled_turns_true_soon_without_listen(conn: asyncpg.Connection, dsn: str,
                                                            pgbouncer: PgBouncer, tmp_path: Path) -> None:
    """Behind PgBouncer in transaction mode with no DATABASE_LISTEN_URL there is no LISTEN: the
    worker looks for cancellations every poll interval, not only at its heartbeat (30 s here)."""
    flag = tmp_path / "flag"
    job = JobCreate("waits", {"flag": str(flag), "runs": str(tmp_path / "runs")})
    await transitions.enqueue(conn, [job])
    worker = RunningWorker(pgbouncer.url(dsn, declared=False), {"waits": procs.WaitsForCancel()},
                           JOB_HEARTBEAT_INTERVAL=30, JOB_PROCESSOR_POLL_INTERVAL=0.2)
    try:
        await wait_for(lambda: _exists(tmp_path / "runs"), what="the processor to run")
        await transitions.cancel(conn, [job.id], transitions.Actor("api", "tester"))
        started = time.monotonic()
        await wait_for(lambda: _exists(flag), what="the processor to see job.cancelled")
        seen_after = time.monotonic() - started
        await wait_for(lambda: _all(conn, [job.id], "cancelled"), what="the cancellation")
    finally:
        await worker.stop()
    assert flag.read_text() == "cancelled"
    assert seen_after < 10, f"job.cancelled turned true {seen_after:.1f} s after the cancel"


async def _exists(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


async def test_a_process_run_forwards_job_calls_to_the_worker(conn: asyncpg.Connection, dsn: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    job = JobCreate("computes", {"n": 100_000, "key": "offloop-event"})
    failing = JobCreate("fails", {})
    worker = RunningWorker(dsn, {"computes": procs.Computes(), "fails": procs.FailsInProcess()},
                           JOB_RETRY_INTERVALS=[0.1])
    try:
        await transitions.enqueue(conn, [job, failing])
        await wait_for(lambda: _all(conn, [job.id]), what="the process job to complete")
        await wait_for(lambda: _all(conn, [failing.id], "failed"), what="the failing process job to fail")
    finally:
        await worker.stop()
    rows = await _rows(conn, job.id, failing.id)
    result = rows[job.id]["result_data"]
    assert result["total"] == sum(range(100_000)) and result["id_seen"] == job.id
    assert result["pid"] != os.getpid()
    # emit_event ran in the worker (the first emit of a key is the first, the second is not),
    # and the StepError that job.sleep raised there was raised in the child.
    assert (result["first"], result["again"], result["refused"]) == (True, False, "StepError")
    # Its log records reached the worker's logging, as from a thread of its own.
    child_records = [r for r in caplog.records if r.name == "offloop.child"]
    assert [r.getMessage() for r in child_records] == [f"computed in {result['pid']}", "handled"]
    assert child_records[0].process == result["pid"] and child_records[0].levelname == "INFO"
    assert "KeyError: 'missing'" in (child_records[1].exc_text or "")
    assert rows[failing.id]["error_message"] == f"ValueError: bad input in {failing.id}"
    assert rows[failing.id]["attempts"] == 2  # retried like any error


async def test_the_watchdog_names_a_processor_that_blocks_the_loop_once(
        conn: asyncpg.Connection, dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="jobdesk.worker")
    jobs = [JobCreate("loop.block", {"seconds": 0.4}) for _ in range(3)]
    worker = RunningWorker(dsn, {"loop.block": procs.BlocksTheLoop()}, MAX_CONCURRENT_JOBS=1)
    try:
        ids = await transitions.enqueue(conn, jobs)
        await wait_for(lambda: _all(conn, ids), what="the jobs to complete")
    finally:
        await worker.stop()
    warnings = [r.getMessage() for r in caplog.records if "blocked the event loop" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("processor loop.block blocked the event loop for 0.")
    assert warnings[0].endswith(" s; make it a SyncProcessor (a plain def) to run it in a thread")
