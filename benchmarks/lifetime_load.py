"""The load of `benchmarks/lifetime_bench.py` on one side, and what is read while it runs.

Three tasks share the measuring process's event loop: the enqueuer (plain-SQL INSERTs paced to
the wall clock), the transaction that holds vacuum back for the middle half of the run, and the
monitor, which every second counts the jobs completed since its last look and their pickup times,
every few seconds sums the dead tuples of `jobs`, and at each minute's end reads its size.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg

from benchmarks.lifetime_sides import (
    Side,
    backend_cpu_s,
    check_workers,
    dead_tuples,
    jobs_size,
    leaf_count,
    lsn,
    mb,
    server_cpu_s,
    start_workers,
    stop_workers,
)

TICK_S = 0.05  # the enqueuer sends one INSERT this often
LOOK_S = 1.0  # the monitor counts completions this often
DEAD_EVERY_S = 5.0  # and sums the dead tuples this often
SETTLE = timedelta(seconds=2)  # a completion this old has committed: the monitor reads up to now - SETTLE
HOLD = (0.2, 0.7)  # the idle transaction's start and end, as shares of the run (minutes 2-7 of 10)

INSERT = {  # one multi-row INSERT a tick, as any client's plain SQL would send it
    "small": """INSERT INTO jobs (type, input_data)
                SELECT 'bench.noop', jsonb_build_object('n', g) FROM generate_series($1::bigint + 1, $1 + $2) g""",
    "empty": """INSERT INTO jobs (type, input_data)
                SELECT 'bench.noop', '{}'::jsonb FROM generate_series($1::bigint + 1, $1 + $2) g""",
}
COMPLETED = """
    SELECT floor(extract(epoch FROM updated_at - $3) / 60)::int AS minute, count(*) AS n,
           array_agg(extract(epoch FROM started_at - created_at)::float8) AS pickups
      FROM jobs
     WHERE status = 'completed' AND type = 'bench.noop' AND updated_at > $1 AND updated_at <= $2
     GROUP BY 1"""


@dataclass
class Plan:
    minutes: float
    rate: int
    workers: int
    concurrency: int
    idle_reads_jobs: bool
    input: str  # a key of INSERT


@dataclass
class Outcome:
    """One side's figures over the measured window (from the first INSERT to the run's end)."""

    seconds: float = 0.0
    enqueued: int = 0
    cpu_s: float = 0.0  # the server's, less the monitor's own backend
    wal: int = 0
    per_minute: list[int] = field(default_factory=list)  # jobs completed in each minute
    sizes: list[int] = field(default_factory=list)  # of jobs with its indexes, at each minute's end
    queued: list[int] = field(default_factory=list)  # jobs waiting at each minute's end
    loads: list[float] = field(default_factory=list)  # the machine's 1-minute load average then
    dead_peak: int = 0
    dead_peak_at: float = 0.0  # seconds into the run
    pickups: list[float] = field(default_factory=list)  # started_at - created_at, seconds
    size_end: int = 0
    leaves: int = 0  # relations in jobs' partition tree that hold rows
    database: int = 0

    @property
    def jobs(self) -> int:
        return sum(self.per_minute)


async def enqueue(dsn: str, plan: Plan, start: float, stop: asyncio.Event, out: Outcome) -> None:
    """plan.rate jobs a second from `start` (monotonic) until `stop`, one INSERT every TICK_S."""
    conn = await asyncpg.connect(dsn)
    try:
        while not stop.is_set():
            due = int(plan.rate * (time.monotonic() - start)) - out.enqueued
            if due > 0:
                await conn.execute(INSERT[plan.input], out.enqueued, due)
                out.enqueued += due
            await asyncio.sleep(TICK_S)
    finally:
        await conn.close()


async def hold_vacuum(dsn: str, plan: Plan, start: float) -> None:
    """An idle REPEATABLE READ transaction from HOLD[0] to HOLD[1] of the run: its snapshot keeps
    vacuum from removing any row version that died after it began, in every table. It reads
    `workers`, not `jobs`, unless plan.idle_reads_jobs: a read of `jobs` would also hold an
    ACCESS SHARE lock on every partition until COMMIT, which blocks partition maintenance
    (DETACH, DROP) as well; that is a harder, separate scenario."""
    span = plan.minutes * 60
    await asyncio.sleep(max(0.0, start + HOLD[0] * span - time.monotonic()))
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await conn.fetchval(f"SELECT count(*) FROM {'jobs' if plan.idle_reads_jobs else 'workers'}")
        print(f"    idle transaction open ({'reads jobs' if plan.idle_reads_jobs else 'reads workers'})", flush=True)
        await asyncio.sleep(max(0.0, start + HOLD[1] * span - time.monotonic()))
        await conn.execute("COMMIT")
        print("    idle transaction committed", flush=True)
    finally:
        await conn.close()


class Monitor:
    """The monitor's connection and what it has counted; its own backend's CPU is left out."""

    def __init__(self, conn: asyncpg.Connection, out: Outcome, minutes: int) -> None:
        self.conn = conn
        self.out = out
        out.per_minute = [0] * minutes
        self.seen: datetime | None = None  # completions up to here are counted
        self.t0: datetime | None = None

    async def begin(self) -> None:
        self.t0 = await self.conn.fetchval("SELECT clock_timestamp()")
        self.seen = self.t0

    async def count_until(self, upto: datetime) -> None:
        """Count the completions in (seen, upto]: per minute of the run, with their pickups."""
        for row in await self.conn.fetch(COMPLETED, self.seen, upto, self.t0):
            if 0 <= row["minute"] < len(self.out.per_minute):
                self.out.per_minute[row["minute"]] += row["n"]
                self.out.pickups.extend(row["pickups"])
        self.seen = upto

    async def look(self) -> None:
        await self.count_until(await self.conn.fetchval("SELECT clock_timestamp() - $1::interval", SETTLE))

    async def dead(self, elapsed: float) -> None:
        n = await dead_tuples(self.conn)
        if n > self.out.dead_peak:
            self.out.dead_peak, self.out.dead_peak_at = n, elapsed

    async def minute_end(self, side: str, minute: int) -> None:
        self.out.sizes.append(await jobs_size(self.conn))
        self.out.queued.append(await self.conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued'"))
        self.out.loads.append(os.getloadavg()[0])
        done = self.out.per_minute[minute - 2] if minute >= 2 else 0  # minute - 1 is counted by now
        print(f"    {side} minute {minute}: jobs {mb(self.out.sizes[-1])}, {self.out.queued[-1]:,} queued, "
              f"dead tuples peak so far {self.out.dead_peak:,}, load average {self.out.loads[-1]:.2f}"
              + (f", minute {minute - 1} completed {done:,}" if minute >= 2 else ""), flush=True)


async def wait_for_workers(conn: asyncpg.Connection, count: int, procs: list, logs: Path) -> None:  # type: ignore[type-arg]
    """Until `count` workers have registered as running (at most a minute)."""
    deadline = time.monotonic() + 60
    while await conn.fetchval("SELECT count(*) FROM workers WHERE state = 'running'") < count:
        check_workers(procs, logs)
        if time.monotonic() > deadline:
            raise RuntimeError("the workers did not register within a minute")
        await asyncio.sleep(0.2)


async def run_side(side: Side, dsn: str, postmaster: int, plan: Plan, logs: Path) -> Outcome:
    """The whole load on one side: workers, then enqueuer, vacuum holder and monitor for
    plan.minutes, then the figures."""
    out = Outcome()
    conn = await asyncpg.connect(dsn)
    procs = start_workers(side, dsn, plan.workers, plan.concurrency, logs)
    try:
        await wait_for_workers(conn, plan.workers, procs, logs)
        monitor = Monitor(conn, out, math.ceil(plan.minutes))
        me = await conn.fetchval("SELECT pg_backend_pid()")
        cpu0, mine0, wal0 = server_cpu_s(postmaster), backend_cpu_s(me), await lsn(conn)
        await monitor.begin()
        start, stop = time.monotonic(), asyncio.Event()
        tasks = [asyncio.create_task(enqueue(dsn, plan, start, stop, out)),
                 asyncio.create_task(hold_vacuum(dsn, plan, start))]
        await watch(side, monitor, plan, start, procs, logs, tasks)
        stop.set()
        out.cpu_s = server_cpu_s(postmaster) - cpu0 - (backend_cpu_s(me) - mine0)
        out.wal = await lsn(conn) - wal0
        out.seconds = time.monotonic() - start
        end = await conn.fetchval("SELECT clock_timestamp()")
        await asyncio.gather(*tasks)
        out.size_end, out.leaves = await jobs_size(conn), await leaf_count(conn)
        out.database = await conn.fetchval("SELECT pg_database_size(current_database())")
        await asyncio.sleep(SETTLE.total_seconds() + 0.5)
        await monitor.count_until(end)
    finally:
        stop_workers(procs)
        await conn.close()
    return out


async def watch(side: Side, monitor: Monitor, plan: Plan, start: float, procs: list, logs: Path,  # type: ignore[type-arg]
                tasks: list[asyncio.Task[None]]) -> None:
    """The monitor's loop until the run's end: a look every second, dead tuples every few."""
    span, minute, next_dead = plan.minutes * 60, 1, 0.0
    while (elapsed := time.monotonic() - start) < span:
        check_workers(procs, logs)
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise RuntimeError(f"{side.name}: a load task failed") from task.exception()
        await monitor.look()
        if elapsed >= next_dead:
            await monitor.dead(elapsed)
            next_dead = elapsed + DEAD_EVERY_S
        if elapsed >= minute * 60:
            await monitor.minute_end(side.name, minute)
            minute += 1
        await asyncio.sleep(max(0.0, min(LOOK_S, span - (time.monotonic() - start))))
    await monitor.dead(span)
    if minute * 60 <= span + 1:
        await monitor.minute_end(side.name, minute)
