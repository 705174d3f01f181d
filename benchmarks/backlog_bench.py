"""Backlog benchmark: a worker's throughput on its own type with jobs it cannot take ahead of it.

    python benchmarks/backlog_bench.py [--jobs 20000] [--backlog 100000] [--scheduled 1000000] [--runs 1]
                                       [--cases baseline,scheduled]

Each case runs on a fresh database of a private embedded PostgreSQL (durable settings): the
backlog is inserted first, so that it sits ahead of the worker's jobs in enqueue order, then
`VACUUM ANALYZE` (except in the stale-statistics case), then N no-op jobs of the worker's types,
CHECKPOINT, and one `jobdesk worker` (MAX_CONCURRENT_JOBS=10) is launched; jobs/s = N /
(all N completed - launch). Each run also shows where the time went: the worker's and
PostgreSQL's CPU per job (PostgreSQL's includes this script's polling, the same in every case),
and how many jobs each round trip to claim and complete carried. Cases, each also shown as a
share of the same run's baseline:

* baseline: nothing ahead;
* unserved: 100,000 queued jobs of a type no live worker serves;
* unserved x50: the same 100,000 spread over 50 unserved types;
* retry in 1 h: 100,000 queued jobs of the worker's own type waiting for a retry an hour away;
* 20 types: a worker serving 20 types (the N jobs spread over them) behind all of the above
  at once (100,000 unserved over 50 types and 100,000 future retries);
* stale stats: the 20-type case again, but the statistics were taken on the empty table, so
  the planner never saw the backlog;
* scheduled: 1,000,000 (`--scheduled`) queued jobs of the worker's own type scheduled for an
  hour from now (`scheduled_at`, plain SQL);
* limit 10: nothing ahead, but `JOB_TYPE_LIMITS=bench.noop=10` (the worker's own type, at its
  own concurrency, so every claim takes the limited path and the limit binds);
* limit other: nothing ahead, `JOB_TYPE_LIMITS` limits a type the worker does not serve.

Autovacuum is off for `jobs` in every case (`--autovacuum` leaves it on): a vacuum of the
backlog's table during a run of a few seconds costs the same whatever the claim does, and on
two cores it would blur what is measured here, the claim.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.engine_bench import stop_worker, worker_env  # noqa: E402
from benchmarks.harness import server_cpu_seconds  # noqa: E402
from jobdesk.embedded.server import EmbeddedServer  # noqa: E402
from tests import pg  # noqa: E402
from tests.helpers import set_autovacuum  # noqa: E402

PROCESSORS = "benchmarks.bench_processors"
MANY_TYPES = 20  # bench.noop plus 19 bench.extra.N types, see bench_processors


async def add_unserved(conn: asyncpg.Connection, n: int, types: int) -> None:
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data)
        SELECT 'bench.unserved.' || (g % $2), 1, '{}'::jsonb FROM generate_series(1, $1) g""", n, types)


async def add_future_retries(conn: asyncpg.Connection, n: int) -> None:
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data, retry_count, next_retry_at, error_message)
        SELECT 'bench.noop', 1, '{}'::jsonb, 1, now() + interval '1 hour', 'boom'
          FROM generate_series(1, $1)""", n)


async def add_scheduled(conn: asyncpg.Connection, n: int) -> None:
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data, scheduled_at)
        SELECT 'bench.noop', 1, '{}'::jsonb, now() + interval '1 hour' FROM generate_series(1, $1)""", n)


@dataclass(frozen=True)
class Case:
    name: str
    backlog: Callable[[asyncpg.Connection, int], Awaitable[None]] | None
    types: int = 1  # how many types the worker's jobs are spread over (and it serves)
    stale: bool = False
    scheduled: bool = False  # the backlog is --scheduled jobs, not --backlog
    env: tuple[tuple[str, str], ...] = ()  # more settings for the worker


async def _both(conn: asyncpg.Connection, n: int) -> None:
    await add_unserved(conn, n, 50)
    await add_future_retries(conn, n)


CASES = [
    Case("baseline", None),
    Case("unserved", lambda c, n: add_unserved(c, n, 1)),
    Case("unserved x50", lambda c, n: add_unserved(c, n, 50)),
    Case("retry in 1 h", add_future_retries),
    Case("20 types", _both, types=MANY_TYPES),
    Case("stale stats", _both, types=MANY_TYPES, stale=True),
    Case("scheduled", add_scheduled, scheduled=True),
    Case("limit 10", None, env=(("JOB_TYPE_LIMITS", "bench.noop=10"),)),
    Case("limit other", None, env=(("JOB_TYPE_LIMITS", "bench.other=10"),)),
]


def job_types(count: int) -> list[str]:
    return ["bench.noop", *(f"bench.extra.{i}" for i in range(1, count))]


@dataclass(frozen=True)
class Run:
    rate: float  # jobs/s
    worker_ms: float  # the worker's CPU per job
    server_ms: float  # PostgreSQL's CPU per job
    per_round: float  # jobs per round trip to claim and complete

    def describe(self) -> str:
        return (f"{self.rate:8,.0f} jobs/s   CPU per job: worker {self.worker_ms:.3f} ms, "
                f"PostgreSQL {self.server_ms:.3f} ms   {self.per_round:4.1f} jobs per round trip")


ROUNDS = re.compile(r"(\d+) round trip\(s\) to claim and complete")


async def run_case(server: EmbeddedServer, case: Case, n: int, backlog: int, autovacuum: bool = False) -> Run:
    dsn = await pg.create_test_database(server.dsn)
    conn = await asyncpg.connect(dsn)
    log = tempfile.TemporaryFile()
    try:
        if not autovacuum or case.stale:
            await set_autovacuum(conn, False)
        if case.stale:
            await conn.execute("ANALYZE jobs")
        if case.backlog is not None:
            await case.backlog(conn, backlog)
            if not case.stale:
                await conn.execute("VACUUM ANALYZE jobs")
        mark = await conn.fetchval("SELECT COALESCE(max(seq), 0) FROM jobs")
        await conn.execute("""
            INSERT INTO jobs (type, user_id, input_data)
            SELECT ($2::text[])[1 + g % cardinality($2::text[])], 1, '{}'::jsonb
              FROM generate_series(1, $1) g""", n, job_types(case.types))
        await conn.execute("CHECKPOINT")
        env = worker_env(dsn)
        env["BENCH_TYPES"] = str(MANY_TYPES)
        env.update(case.env)
        env["LOG_LEVEL"] = "INFO"  # for the worker's last line, which counts its round trips
        server_cpu = server_cpu_seconds(server.pgdata)
        start = time.time()
        proc = subprocess.Popen([sys.executable, "-m", "jobdesk.cli", "worker", "--processors", PROCESSORS],
                                env=env, cwd=ROOT, stderr=log)
        try:
            while True:
                left = await conn.fetchval("SELECT count(*) FROM jobs WHERE status IN ('queued', 'in_progress') "
                                           "AND seq > $1", mark)
                if left == 0:
                    break
                if proc.poll() is not None:
                    log.seek(0)
                    tail = log.read().decode(errors="replace").strip().splitlines()[-5:]
                    raise RuntimeError(f"worker exited with {proc.returncode}: " + " | ".join(tail))
                if time.time() - start > 600:
                    raise RuntimeError(f"{left} jobs left after 600 s")
                await asyncio.sleep(0.25 if left > 1000 else 0.01)
            done = time.time()
            server_cpu = server_cpu_seconds(server.pgdata) - server_cpu  # before the worker's backends end
        finally:
            _, worker_cpu = stop_worker(proc)
        completed = await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'completed' AND seq > $1", mark)
        assert completed == n, f"only {completed} of {n} completed"
        untouched = await conn.fetchval("SELECT count(*) FROM jobs WHERE seq <= $1 AND status <> 'queued'", mark)
        assert untouched == 0, f"{untouched} backlog jobs were run"
        log.seek(0)
        rounds = ROUNDS.search(log.read().decode(errors="replace"))
    finally:
        log.close()
        await conn.close()
        await pg.drop_test_database(dsn)
    return Run(n / (done - start), 1000 * worker_cpu / n, 1000 * server_cpu / n,
               n / int(rounds.group(1)) if rounds and int(rounds.group(1)) else float("nan"))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--scheduled", type=int, default=1_000_000, help="jobs scheduled for later (scheduled case)")
    parser.add_argument("--cases", default="", help="comma-separated case names to run (baseline always runs)")
    parser.add_argument("--runs", type=int, default=1, help="runs per case, interleaved; the median is shown")
    parser.add_argument("--autovacuum", action="store_true", help="leave autovacuum on (not in the stale case)")
    args = parser.parse_args()

    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        print(f"jobdesk backlog benchmark: {args.jobs:,} no-op jobs behind {args.backlog:,}-job backlogs, "
              f"MAX_CONCURRENT_JOBS=10, one worker, {os.cpu_count()} cores, autovacuum "
              f"{'on' if args.autovacuum else 'off'}", flush=True)
        wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
        unknown = wanted - {c.name for c in CASES}
        if unknown:
            raise SystemExit(f"--cases: unknown case(s) {', '.join(sorted(unknown))}")
        cases = [c for c in CASES if not wanted or c.name in wanted or c.name == "baseline"]
        results: dict[str, list[Run]] = {c.name: [] for c in cases}
        for i in range(args.runs):
            for case in cases:
                size = args.scheduled if case.scheduled else args.backlog
                run = await run_case(server, case, args.jobs, size, args.autovacuum)
                results[case.name].append(run)
                print(f"  run {i + 1} {case.name:<14} {run.describe()}", flush=True)
        base = statistics.median(r.rate for r in results["baseline"])
        print(f"{'case':<14} {'jobs/s':>8}  share of baseline  (medians) worker ms/job  PostgreSQL ms/job  jobs/round")
        for case in cases:
            runs = results[case.name]
            rate = statistics.median(r.rate for r in runs)
            print(f"{case.name:<14} {rate:8,.0f}  {rate / base:5.2f}              "
                  f"{statistics.median(r.worker_ms for r in runs):13.3f}  "
                  f"{statistics.median(r.server_ms for r in runs):17.3f}  "
                  f"{statistics.median(r.per_round for r in runs):10.1f}")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
