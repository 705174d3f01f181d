"""No double runs from a blocked loop: an `async def` that blocks the event loop for longer than
the lease does not let another worker take its job and run it again, because the lease is
renewed from a thread of its own. It lapses when the loop stays blocked past the time limit of
the jobs it runs. Directly, and through PgBouncer in transaction mode."""

from __future__ import annotations

import subprocess
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from tests.helpers import start_worker, stop_workers, wait_for
from tests.pgbouncer import PgBouncer

PROCESSORS = "tests.runtime.offloop_processors"
SHORT_LEASE = {"JOB_LEASE_TIMEOUT": "3", "JOB_HEARTBEAT_INTERVAL": "0.5", "JOB_PROCESSOR_POLL_INTERVAL": "0.1",
               "JOB_RETRY_INTERVALS": "0.1", "MAX_CONCURRENT_JOBS": "2"}


def _two_workers(url: str, logs: Path, **extra: str) -> list[subprocess.Popen[str]]:
    return [start_worker(url, "--processors", PROCESSORS, log_path=logs / f"worker{i}.log", **SHORT_LEASE, **extra)
            for i in (1, 2)]


async def _live_workers(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM workers WHERE state = 'running'"))


async def _status(conn: asyncpg.Connection, job_id: str) -> str:
    return str(await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id))


def _runs(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _runs_once_though_it_blocks_past_the_lease(conn: asyncpg.Connection, url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    workers = _two_workers(url, tmp_path)
    try:
        await wait_for(lambda: _is(_live_workers(conn), 2), timeout=60, what="both workers to register")
        job = JobCreate("offloop.block_loop", {"seconds": 8, "runs": str(runs)})
        await transitions.enqueue(conn, [job])
        await wait_for(lambda: _is(_status(conn, job.id), "completed"), timeout=60, what="the job to complete")
        lost = await conn.fetchval("SELECT count(*) FROM workers WHERE state = 'lost'")
    finally:
        stop_workers(workers)
    assert len(_runs(runs)) == 1, _runs(runs)
    assert lost == 0
    assert await conn.fetchval("SELECT attempts FROM jobs WHERE id = $1", job.id) == 1
    logs = "".join((tmp_path / f"worker{i}.log").read_text() for i in (1, 2))
    assert "processor offloop.block_loop blocked the event loop for" in logs


async def _is(value: object, wanted: object) -> bool:
    return await value == wanted  # type: ignore[misc]


async def test_a_blocking_async_def_runs_once_on_two_workers(conn: asyncpg.Connection, dsn: str,
                                                             tmp_path: Path) -> None:
    await _runs_once_though_it_blocks_past_the_lease(conn, dsn, tmp_path)


async def test_a_blocking_async_def_runs_once_through_pgbouncer(conn: asyncpg.Connection, dsn: str,
                                                                pgbouncer: PgBouncer, tmp_path: Path) -> None:
    await _runs_once_though_it_blocks_past_the_lease(conn, pgbouncer.url(dsn, declared=False), tmp_path)


@pytest.mark.parametrize("limit", ["1"])
async def test_the_lease_lapses_once_the_loop_is_blocked_past_the_time_limit(
        conn: asyncpg.Connection, dsn: str, tmp_path: Path, limit: str) -> None:
    runs = tmp_path / "runs"
    workers = _two_workers(dsn, tmp_path, JOB_TYPE_TIMEOUTS=f"offloop.block_loop={limit}")
    try:
        await wait_for(lambda: _is(_live_workers(conn), 2), timeout=60, what="both workers to register")
        job = JobCreate("offloop.block_loop", {"seconds": 8, "runs": str(runs)})
        await transitions.enqueue(conn, [job])
        await wait_for(lambda: conn.fetchval("SELECT count(*) FROM job_attempts WHERE job_id = $1 "
                                             "AND error_message = 'worker lost'", job.id),
                       timeout=60, what="the job to be taken back from its blocked worker")
    finally:
        stop_workers(workers)
    logs = "".join((tmp_path / f"worker{i}.log").read_text() for i in (1, 2))
    assert "longer than the time limit of the jobs it runs" in logs
