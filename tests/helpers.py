"""Helpers shared by the tests (kept out of conftest.py so tests can import them)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import asyncpg

from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor

ROOT = Path(__file__).resolve().parent.parent
JOBDESK = [sys.executable, "-m", "jobdesk.cli"]
TERMINAL = ("completed", "failed", "cancelled")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli_env(dsn: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOB", "DATABASE_URL", "DB_POOL"))}
    if dsn is not None:
        env["DATABASE_URL"] = dsn
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT)])
    env.update(extra)
    return env


def run_cli(*args: str, dsn: str | None, timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run `jobdesk ARGS` in a subprocess against `dsn`; return the finished process."""
    return subprocess.run([*JOBDESK, *args], env=cli_env(dsn, **extra), capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def start_worker(dsn: str, *args: str, log_path: Path | None = None, **extra: str) -> subprocess.Popen[str]:
    out = open(log_path, "w") if log_path else subprocess.DEVNULL
    return subprocess.Popen([*JOBDESK, "worker", *args], env=cli_env(dsn, **extra), stdout=out,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT)


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    """SIGTERM to every worker process at once (each drains in parallel), then wait for each;
    one still running after 30 s is killed."""
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


@contextlib.contextmanager
def flow_workers(dsn: str, log_dir: Path, count: int, **settings: str) -> Iterator[list[subprocess.Popen[str]]]:
    """`count` worker processes serving the flow.* types (tests/flow_processors.py), polling every
    0.1 s with 10 slots each unless `settings` say otherwise; each logs to `log_dir/worker-N.log`.
    Stopped on exit."""
    env = {"JOB_PROCESSOR_POLL_INTERVAL": "0.1", "MAX_CONCURRENT_JOBS": "10", **settings}
    procs = [start_worker(dsn, "--processors", "flow_processors", log_path=log_dir / f"worker-{i}.log", **env)
             for i in range(count)]
    try:
        yield procs
    finally:
        stop_workers(procs)


SMALL_PARTITION = 1_000  # rows; a sequential scan of a partition this small is not counted


class JobsReads(NamedTuple):
    seq_scans: int  # sequential scans of `jobs`
    rows: int  # rows of `jobs` those scans and index scans fetched from the table


async def reads_of_jobs(conn: asyncpg.Connection, *sessions: asyncpg.Connection | asyncpg.Pool) -> JobsReads:
    """How `jobs` was read so far, by every session. A session reports its counts at the
    end of a transaction at most once a second, or once it has been idle for 10 s: so after a
    second, each of `sessions` (every connection of a pool) runs a statement first. Sessions
    that run statements all the time (a worker's) need not be given."""
    await asyncio.sleep(1.1)
    for session in sessions:
        if isinstance(session, asyncpg.Pool):
            held = [await session.acquire() for _ in range(session.get_size())]
            try:
                for held_conn in held:
                    await held_conn.execute("SELECT 1")
            finally:
                for held_conn in held:
                    await session.release(held_conn)
        else:
            await session.execute("SELECT 1")
    # This session's own counts, reported now even if another session holds the shared entry
    # (an unforced report skips it then), and a fresh snapshot of everyone's.
    await conn.execute("SELECT pg_stat_force_next_flush()")
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    # Over every partition of `jobs` (sql/041). The sequential scans counted are those of
    # partitions that hold more than SMALL_PARTITION rows: the planner rightly reads a few dozen
    # live jobs beside a large partition of completed ones from their table, and a partition made
    # ahead, empty, the same way. The rows read count everywhere.
    row = await conn.fetchrow(f"""
        SELECT coalesce(sum(s.seq_scan) FILTER (WHERE s.n_live_tup > {SMALL_PARTITION}), 0) AS seq_scan,
               coalesce(sum(s.seq_tup_read + coalesce(s.idx_tup_fetch, 0)), 0) AS rows
          FROM pg_partition_tree('jobs') t JOIN pg_stat_user_tables s ON s.relid = t.relid
         WHERE t.isleaf""")
    return JobsReads(int(row["seq_scan"]), int(row["rows"]))


async def seq_scans_of_jobs(conn: asyncpg.Connection, *sessions: asyncpg.Connection | asyncpg.Pool) -> int:
    """Sequential scans of `jobs` so far, by every session (see `reads_of_jobs`)."""
    return (await reads_of_jobs(conn, *sessions)).seq_scans


async def wait_for(predicate: Callable[[], Awaitable[Any]], timeout: float = 20.0,
                   interval: float = 0.05, what: str = "condition") -> Any:
    """Poll an async predicate until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {value!r})")
        await asyncio.sleep(interval)


async def status_counts(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch("SELECT status, count(*) AS n FROM jobs GROUP BY status")
    return {r["status"]: r["n"] for r in rows}


async def assert_no_job_lost(conn: asyncpg.Connection, expected_total: int) -> dict[str, int]:
    """Every job is in a terminal status and the counts add up."""
    counts = await status_counts(conn)
    assert sum(counts.values()) == expected_total, counts
    assert set(counts) <= set(TERMINAL), f"jobs not in a terminal status: {counts}"
    return counts


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux, from /proc; `pid` single-threaded)."""
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


class RunningWorker:
    """A Worker running in this test's event loop; stop() drains and joins it."""

    def __init__(self, dsn: str, processors: dict[str, Any], **settings: Any) -> None:
        from jobdesk.core.settings import load_settings
        from jobdesk.runtime.worker import Worker

        defaults: dict[str, Any] = {"DATABASE_URL": dsn, "JOB_PROCESSOR_POLL_INTERVAL": 0.05,
                                    "JOB_RETRY_INTERVALS": [0.1, 0.1, 0.1]}
        defaults.update(settings)
        self.worker = Worker(load_settings(**defaults), dsn, processors)
        self.task = asyncio.create_task(self.worker.run(), name="test-worker")

    async def stop(self) -> None:
        """Stop, waiting as long as the worker may: its running jobs get JOB_SHUTDOWN_TIMEOUT, then
        the last writes have some seconds more (a bound at the timeout itself would race it)."""
        self.worker.request_stop()
        await asyncio.wait_for(self.task, self.worker.settings.JOB_SHUTDOWN_TIMEOUT + 30)


class Inbox:
    """A small HTTP server on loopback that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        inbox = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                inbox.messages.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class RecordsStarts(BaseProcessor):
    """A no-op processor that notes when each job started (`starts`, by job id, `time.time()`)."""

    def __init__(self) -> None:
        self.starts: dict[str, float] = {}

    async def process(self, job: Job) -> ProcessorResult:
        self.starts[job.id] = time.time()
        return ProcessorResult({})


async def set_autovacuum(conn: asyncpg.Connection, enabled: bool) -> None:
    """Autovacuum on or off for every partition of `jobs` (a partitioned table has no storage
    parameters of its own)."""
    for (name,) in await conn.fetch("SELECT relid::regclass::text FROM pg_partition_tree('jobs') WHERE isleaf"):
        await conn.execute(f"ALTER TABLE {name} SET (autovacuum_enabled = {'on' if enabled else 'off'})")


async def history_partitions(conn: asyncpg.Connection, *days_ago: float) -> None:
    """Completed jobs' partitions for the past, as a database that has run that long has them
    (sql/041): the first partition (which ends when the database was migrated, empty in a test)
    is made again to end `max(days_ago)` days ago, then one partition ends at each of the others,
    and the last one at the migration."""
    upper = await conn.fetchval("SELECT upper FROM jobdesk_completed_partitions() WHERE name = 'jobs_completed_start'")
    assert not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM jobs_completed_start)"), "history comes first"
    ends = [await conn.fetchval("SELECT now() - make_interval(secs => $1)", d * 86400.0)
            for d in sorted(days_ago, reverse=True)]
    await conn.execute("DROP TABLE jobs_completed_start")
    await conn.execute("CREATE TABLE jobs_completed_start PARTITION OF jobs_completed "
                       f"FOR VALUES FROM (MINVALUE) TO ('{ends[0].isoformat()}')")
    await conn.execute("ALTER TABLE jobs_completed_start ADD PRIMARY KEY (id)")
    for lower, end in zip(ends, [*ends[1:], upper], strict=True):
        await conn.fetchval("SELECT jobdesk_make_completed_partition($1, $2)", lower, end)
