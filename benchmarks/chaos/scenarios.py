"""The cases of the chaos suite, and how one is run: a fresh database, two workers, the
producer at its fixed rate; a warm-up, a baseline, the fault's window, a time after it; then the
producer stops, the queue drains, and `measure` counts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from benchmarks.chaos import faults, measure
from benchmarks.chaos.cluster import Server, Workers, fresh_database
from benchmarks.chaos.driver import Driver
from benchmarks.chaos.load import Producer
from jobdesk import JobClient

WORKERS = ("a", "b")
CONCURRENCY = 10  # MAX_CONCURRENT_JOBS of each worker


@dataclass(frozen=True)
class Timing:
    warmup: float
    baseline: float
    drain: float  # most seconds to wait for the queue to empty once the producer stops
    lease: float  # JOB_LEASE_TIMEOUT of the workers
    heartbeat: float  # JOB_HEARTBEAT_INTERVAL


FULL = Timing(warmup=5, baseline=15, drain=120, lease=10, heartbeat=2)
QUICK = Timing(warmup=1, baseline=2, drain=30, lease=3, heartbeat=0.5)


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    fault: faults.Fault
    window: tuple[float, float]  # seconds the fault lasts: full, quick
    after: tuple[float, float]  # seconds measured after it: full, quick
    rate: float = 200  # jobs/s offered
    ms: float = 50  # each job's run time
    period: tuple[float, float] = (20, 2.5)  # between repeated kills
    samples: bool = False  # dead tuples and sizes of jobs, before, during and after the fault


CASES = (
    Case("kill", "`kill -9` of a worker, every 20 s", faults.kill_workers, (125, 4), (30, 4)),
    Case("restart", "PostgreSQL restart", faults.restart_server, (20, 3), (20, 3)),
    Case("terminate", "`pg_terminate_backend` twice a second", faults.terminate_backends, (60, 3), (20, 3)),
    Case("idle_conns", "300 idle connections", faults.idle_connections, (60, 3), (20, 3)),
    Case("idle_tx", "idle transaction holding back vacuum, 300 jobs/s", faults.idle_transaction, (300, 5),
         (120, 3), rate=300, ms=0, samples=True),
    Case("readers", "four `REPEATABLE READ` readers scanning `jobs`", faults.repeatable_read_readers,
         (60, 3), (20, 3)),
    Case("overload", "producer at 1.5× capacity for a minute", faults.overload, (60, 3), (90, 6)),
)
BY_NAME = {c.name: c for c in CASES}


def capacity(case: Case) -> float:
    return len(WORKERS) * CONCURRENCY / (case.ms / 1000) if case.ms > 0 else float("inf")


def worker_env(t: Timing) -> dict[str, str]:
    return {"MAX_CONCURRENT_JOBS": str(CONCURRENCY), "JOB_LEASE_TIMEOUT": str(t.lease),
            "JOB_HEARTBEAT_INTERVAL": str(t.heartbeat), "JOB_RETRY_INTERVALS": ",".join(["1"] * 10),
            "JOB_SHUTDOWN_TIMEOUT": "5"}


async def wait_until(driver: Driver, sql: str, want: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await driver.fetchval(sql) == want:
            return True
        await asyncio.sleep(0.25)
    return False


_SIZES = """
SELECT coalesce(s.n_dead_tup, 0) AS n_dead_tup, coalesce(s.n_live_tup, 0) AS n_live_tup,
       pg_relation_size('jobs') AS heap,
       (SELECT json_object_agg(c.relname, pg_relation_size(c.oid)) FROM pg_index i
          JOIN pg_class c ON c.oid = i.indexrelid
         WHERE i.indrelid = 'jobs'::regclass AND c.relname IN ('jobs_ready_idx', 'jobs_status_idx', 'jobs_pkey'))
         AS idx,
       pg_indexes_size('jobs') AS all_indexes
  FROM pg_stat_user_tables s WHERE s.relid = 'jobs'::regclass"""


async def _sample(driver: Driver, when: str, into: list[dict[str, object]]) -> None:
    row = (await driver.fetch(_SIZES))[0]
    into.append({"when": when, "n_dead_tup": row["n_dead_tup"], "n_live_tup": row["n_live_tup"], "heap": row["heap"],
                 **json.loads(row["idx"]), "all indexes": row["all_indexes"]})


@dataclass
class Marks:
    base_start: float = 0.0
    fault_start: float = 0.0
    fault_end: float = 0.0
    stop: float = 0.0


class CaseRun:
    """One case on a fresh database: `drive` runs it, `close` stops what it started."""

    def __init__(self, server: Server, case: Case, quick: bool, dsn: str, runs_dir: Path) -> None:
        self.server, self.case, self.quick, self.dsn, self.runs_dir = server, case, quick, dsn, runs_dir
        self.t = QUICK if quick else FULL
        self.window, self.after = (case.window[1], case.after[1]) if quick else (case.window[0], case.after[0])
        self.workers = Workers(dsn, runs_dir, worker_env(self.t))
        self.driver = Driver(dsn)
        self.result = measure.CaseResult(case.name, case.title)
        self.marks = Marks()
        self.client: JobClient | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Producer:
        for name in WORKERS:
            self.workers.start(name)
        running = "SELECT count(*) FROM workers WHERE state = 'running'"
        if not await wait_until(self.driver, running, len(WORKERS), 60):
            raise RuntimeError(f"{self.case.name}: the workers did not start (see {self.runs_dir})")
        self.client = await JobClient.connect(self.dsn, pool_size=4, source="chaos-producer")
        producer = Producer(self.client, self.case.rate, self.case.ms)
        self.task = asyncio.create_task(producer.run())
        return producer

    async def drive(self) -> measure.CaseResult:
        case, marks = self.case, self.marks
        producer = await self.start()
        await asyncio.sleep(self.t.warmup)
        marks.base_start = time.time()
        await asyncio.sleep(self.t.baseline)
        ctx = faults.Context(self.server, self.dsn, self.workers, producer, self.driver, self.window,
                             capacity(case), period=case.period[1] if self.quick else case.period[0])
        if case.samples:
            ctx.sample = self.sample
            await self.sample("before")
        marks.fault_start = time.time()
        events = await case.fault(ctx)
        marks.fault_end = time.time()
        await asyncio.sleep(self.after)
        if case.samples:
            await self.sample(f"{self.after:.0f} s after")
        producer.stop()
        assert self.task is not None
        await self.task
        marks.stop = time.time()
        drained = await wait_until(self.driver, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'in_progress')",
                                   0, self.t.drain)
        self.result.notes.update(ctx.notes, drained=drained, unconfirmed=producer.unconfirmed,
                                 producer_errors=producer.errors)
        rows = await self.driver.fetch("""
            SELECT id, status, extract(epoch FROM created_at)::float8 AS created,
                   extract(epoch FROM started_at)::float8 AS started,
                   extract(epoch FROM completed_at)::float8 AS completed, attempts FROM jobs""")
        await self.close()
        _analyse(self.result, case, rows, producer, self.workers, ctx, events, marks, self.runs_dir)
        return self.result

    async def sample(self, when: str) -> None:
        await _sample(self.driver, when, self.result.samples)

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self.workers.stop_all()
        if self.client is not None:
            await self.client.close()
            self.client = None
        await self.driver.close()


async def run_case(server: Server, case: Case, quick: bool, workdir: Path) -> measure.CaseResult:
    dsn = await fresh_database(server, f"chaos_{case.name}")
    runs_dir = workdir / case.name
    runs_dir.mkdir(parents=True, exist_ok=True)
    run = CaseRun(server, case, quick, dsn, runs_dir)
    try:
        return await run.drive()
    finally:
        await run.close()


def _analyse(result: measure.CaseResult, case: Case, rows: list[asyncpg.Record], producer: Producer,
             workers: Workers, ctx: faults.Context, events: list[float], marks: Marks, runs_dir: Path) -> None:
    jobs = {r["id"]: measure.Job(r["status"], r["created"], r["started"], r["completed"], r["attempts"])
            for r in rows}
    result.enqueued, result.unconfirmed = len(producer.confirmed), producer.unconfirmed
    result.completed = sum(1 for i in producer.confirmed if i in jobs and jobs[i].status == "completed")
    result.lost = result.enqueued - result.completed
    starts, _ = measure.read_runs(runs_dir)
    result.reruns, beyond = measure.count_reruns(starts, workers.killed, ctx.restarts)
    result.beyond, result.beyond_ids = len(beyond), beyond[:10]
    first: dict[str, float] = {}
    for run in starts:
        first[run.job_id] = min(run.t, first.get(run.job_id, run.t))
    never_ran = [i for i, j in jobs.items() if j.status == "completed" and i not in first]
    statuses: dict[str, int] = {}
    for j in jobs.values():
        statuses[j.status] = statuses.get(j.status, 0) + 1
    result.notes.update(statuses=statuses, completed_without_a_run=len(never_ran))

    completions = [j.completed for j in jobs.values() if j.completed is not None]
    pre = measure.Phase("before", marks.base_start, marks.fault_start)
    during = measure.Phase("during", marks.fault_start, marks.fault_end)
    post = measure.Phase("after", marks.fault_end, marks.stop)
    result.pre_rate = sum(1 for c in completions if pre.start <= c < pre.end) / (pre.end - pre.start)
    result.recovery_s = measure.recovery(completions, events, result.pre_rate, marks.stop)
    in_window = sum(1 for c in completions if during.start <= c < during.end) / (during.end - during.start)
    result.during_pct = 100 * in_window / result.pre_rate if result.pre_rate else 0.0
    created = sorted(j.created for j in jobs.values())
    started = sorted(first.get(i, j.started if j.started is not None else float("inf")) for i, j in jobs.items())
    result.backlog_s = measure.backlog_back(created, started, pre, marks.fault_end, case.rate, marks.stop)
    overload_rate = float(str(result.notes.get("overload_rate", case.rate)))
    listed = list(jobs.values())
    result.phases = [measure.phase_figures(listed, pre, case.rate),
                     measure.phase_figures(listed, during, overload_rate),
                     measure.phase_figures(listed, post, case.rate)]
    if case.samples:  # the hold in fifths: how the pickup grows with the rows vacuum cannot remove
        span = (during.end - during.start) / 5
        for k in range(5):
            part = measure.Phase(f"hold {k * span:.0f}-{(k + 1) * span:.0f} s", during.start + k * span,
                                 during.start + (k + 1) * span)
            result.phases.insert(1 + k, measure.phase_figures(listed, part, case.rate))
