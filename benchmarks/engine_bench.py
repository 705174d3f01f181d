"""Engine benchmark: throughput and pickup latency of one `jobdesk worker`, with figures printed.

    python benchmarks/engine_bench.py [--jobs 20000] [--runs 3] [--latency 200] [--skip-history]
    python benchmarks/engine_bench.py --log-levels WARNING,INFO,DEBUG [--jobs 20000] [--runs 3]

It starts its own embedded PostgreSQL (durable settings: fsync and synchronous_commit on) in a
temporary folder, and for each measurement a fresh database:

* throughput: N no-op jobs inserted with plain SQL, CHECKPOINT, then one worker process with
  MAX_CONCURRENT_JOBS=10 is launched; jobs/s = N / (all completed - launch). "steady" counts from
  the first job's start instead of the launch.
* latency: the worker idle and listening; one job enqueued at a time (plain SQL INSERT, autocommit),
  each 20 ms after the previous one completed; latency = the processor's first line - the moment
  just before the INSERT. p50/p95/p99 over the samples.
* history: throughput again with 1,000,000 completed jobs and 100,000 blocked jobs (their
  dependency never completes) in the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import pct  # noqa: E402
from tests import pg  # noqa: E402

PROCESSORS = "benchmarks.bench_processors"
WORKER_ARGS: list[str] = []  # more arguments for `jobdesk worker` (--metrics-port)


def worker_env(dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOB")}
    env.update({"DATABASE_URL": dsn, "MAX_CONCURRENT_JOBS": "10", "LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(ROOT)})
    return env


def launch_worker(dsn: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "jobdesk.cli", "worker", "--processors", PROCESSORS,
                             *WORKER_ARGS],
                            env={**worker_env(dsn), **(extra_env or {})}, cwd=ROOT)


def stop_worker(proc: subprocess.Popen[bytes]) -> tuple[int, float]:
    """Stop the worker with SIGTERM; return its exit code and the CPU seconds it used (0 for a
    worker that had already exited and been reaped)."""
    if proc.returncode is not None:
        return proc.returncode, 0.0
    proc.terminate()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        time.sleep(0.01)
    proc.kill()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


async def fresh_db(server_dsn: str) -> str:
    return await pg.create_test_database(server_dsn)


async def insert_noops(conn: asyncpg.Connection, n: int, job_type: str = "bench.noop") -> None:
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs)
        SELECT $1, 1, '{}'::jsonb, '[]'::jsonb FROM generate_series(1, $2)""", job_type, n)


# One job as a backend's plain SQL sends it, each value a parameter (as the peers' harness does).
PER_ROW = "INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs) VALUES ($1, $2, $3::jsonb, $4::jsonb)"


async def insert_rows(conn: asyncpg.Connection, n: int, job_type: str = "bench.noop") -> None:
    """n no-op jobs as plain SQL sends them: one INSERT per row, in one transaction."""
    async with conn.transaction():
        await conn.executemany(PER_ROW, [(job_type, 1, "{}", "[]")] * n)


async def add_history(conn: asyncpg.Connection, completed: int, blocked: int) -> None:
    t0 = time.perf_counter()
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs, status, result_data,
                          completed_at, retry_count)
        SELECT 'bench.noop', 1, '{"old": true}'::jsonb, '[]'::jsonb, 'completed', '{}'::jsonb,
               now() - interval '1 day', 0
          FROM generate_series(1, $1)""", completed)
    # The dependency of every blocked job: a job of a type no worker serves, so it never completes.
    await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('never', 'bench.nobody', '{}')")
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs)
        SELECT 'bench.noop', 1, '{}'::jsonb, '["never"]'::jsonb FROM generate_series(1, $1)""", blocked)
    await conn.execute("VACUUM ANALYZE jobs")
    print(f"    history: {completed:,} completed + {blocked:,} blocked rows in {time.perf_counter() - t0:.1f} s",
          flush=True)


async def throughput(server_dsn: str, n: int, history: bool, log_level: str | None = None) -> dict[str, float]:
    dsn = await fresh_db(server_dsn)
    conn = await asyncpg.connect(dsn)
    try:
        if history:
            await add_history(conn, 1_000_000, 100_000)
        return await run_batch(conn, dsn, n, extra_env={"LOG_LEVEL": log_level} if log_level else None)
    finally:
        await conn.close()
        await pg.drop_test_database(dsn)


async def run_batch(conn: asyncpg.Connection, dsn: str, n: int, *, per_row: bool = False,
                    extra_env: dict[str, str] | None = None) -> dict[str, float]:
    """Enqueue n no-op jobs in the database `dsn` (one set INSERT, or one INSERT per row), CHECKPOINT,
    then time one worker process until every queued no-op is done. Jobs already finished in the table
    are left alone; the figures count only this batch."""
    since = await conn.fetchval("SELECT clock_timestamp()")
    t0 = time.perf_counter()
    if per_row:
        await insert_rows(conn, n)
    else:
        await insert_noops(conn, n)
    enqueue_s = time.perf_counter() - t0
    await conn.execute("CHECKPOINT")
    start_wall = time.time()
    proc = launch_worker(dsn, extra_env)
    try:
        while True:
            # Both counts walk small partial indexes only, whatever the history holds.
            left = await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued' AND pending_deps = 0 "
                                       "AND is_active AND run_at IS NULL AND type = 'bench.noop'")
            running = await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'in_progress'")
            if left == 0 and running == 0:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}")
            await asyncio.sleep(0.25 if left > 1000 else 0.01)
        done_wall = time.time()
    finally:
        rc, cpu_s = stop_worker(proc)
    first, completed = await conn.fetchrow(
        "SELECT extract(epoch FROM min(started_at))::float8, count(*) FROM jobs "
        "WHERE status = 'completed' AND completed_at >= $1", since)
    assert completed == n, f"only {completed} of {n} completed"
    return {"jobs_per_s": n / (done_wall - start_wall), "steady_per_s": n / (done_wall - first),
            "startup_s": first - start_wall, "enqueue_per_s": n / enqueue_s, "worker_rc": rc,
            "cpu_ms_per_job": cpu_s * 1000 / n}


async def latency(server_dsn: str, samples: int, warmup: int = 5) -> list[float]:
    dsn = await fresh_db(server_dsn)
    conn = await asyncpg.connect(dsn)
    proc = launch_worker(dsn)
    try:
        await asyncio.sleep(2.0)  # let it connect and go idle
        out = []
        for i in range(warmup + samples):
            t0 = time.time()
            job_id = await conn.fetchval("INSERT INTO jobs (type, user_id, input_data) "
                                         "VALUES ('bench.stamp', 1, '{}') RETURNING id")
            while True:
                row = await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1 AND status = 'completed'",
                                          job_id)
                if row is not None:
                    break
                await asyncio.sleep(0.005)  # the stamp is taken by the processor; polling only finds it
            if i >= warmup:
                out.append((json.loads(row)["t"] - t0) * 1000)
            await asyncio.sleep(0.02)
        return out
    finally:
        stop_worker(proc)
        await conn.close()
        await pg.drop_test_database(dsn)


async def log_levels(n: int, runs: int, levels: list[str]) -> None:
    """Throughput with the worker at each log level, the levels interleaved run by run."""
    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        print(f"jobdesk engine benchmark by LOG_LEVEL: {n:,} no-op jobs, MAX_CONCURRENT_JOBS=10, one worker, "
              f"{os.cpu_count()} cores, durable commits", flush=True)
        found: dict[str, list[dict[str, float]]] = {level: [] for level in levels}
        for i in range(runs):
            for level in levels:
                r = await throughput(server.dsn, n, history=False, log_level=level)
                found[level].append(r)
                print(f"  run {i + 1} {level:<7}: {r['jobs_per_s']:,.0f} jobs/s launch->done, "
                      f"{r['steady_per_s']:,.0f} steady, worker CPU {r['cpu_ms_per_job']:.3f} ms/job", flush=True)
        base = statistics.median(r["jobs_per_s"] for r in found[levels[0]])
        for level, results in found.items():
            rate = statistics.median(r["jobs_per_s"] for r in results)
            cpu = statistics.median(r["cpu_ms_per_job"] for r in results)
            print(f"{level:<7} median {rate:,.0f} jobs/s ({rate / base:.2f} x {levels[0]}), "
                  f"worker CPU {cpu:.3f} ms/job")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=int, default=200)
    parser.add_argument("--skip-history", action="store_true")
    parser.add_argument("--only-history", action="store_true", help="skip the baseline and latency runs")
    parser.add_argument("--only-latency", action="store_true", help="measure latency alone")
    parser.add_argument("--metrics-port", type=int, metavar="P", help="the worker serves Prometheus metrics")
    parser.add_argument("--log-levels", metavar="L1,L2", help="throughput alone, the worker at each LOG_LEVEL in "
                        "turn, run by run (WARNING,INFO,DEBUG: what its log lines cost; they go to stderr)")
    args = parser.parse_args()
    if args.log_levels:
        await log_levels(args.jobs, args.runs, args.log_levels.split(","))
        return
    if args.metrics_port is not None:
        WORKER_ARGS.extend(["--metrics-port", str(args.metrics_port)])

    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        print(f"jobdesk engine benchmark: {args.jobs:,} no-op jobs, MAX_CONCURRENT_JOBS=10, one worker, "
              f"{os.cpu_count()} cores, durable commits"
              f"{', metrics on' if WORKER_ARGS else ''}", flush=True)
        runs = []
        if args.only_latency:
            lat = await latency(server.dsn, args.latency)
            print(f"LATENCY enqueue->start over {len(lat)} jobs: p50 {pct(lat, 50):.2f} ms, "
                  f"p95 {pct(lat, 95):.2f} ms, p99 {pct(lat, 99):.2f} ms, max {max(lat):.2f} ms", flush=True)
            return
        for i in range(0 if args.only_history else args.runs):
            r = await throughput(server.dsn, args.jobs, history=False)
            runs.append(r)
            print(f"  run {i + 1}: {r['jobs_per_s']:,.0f} jobs/s launch->done, {r['steady_per_s']:,.0f} steady, "
                  f"start-up {r['startup_s']:.2f} s, worker CPU {r['cpu_ms_per_job']:.3f} ms/job, "
                  f"enqueue {r['enqueue_per_s']:,.0f} jobs/s", flush=True)
        base = None
        if runs:
            base = statistics.median(r["jobs_per_s"] for r in runs)
            print(f"THROUGHPUT median {base:,.0f} jobs/s "
                  f"(steady {statistics.median(r['steady_per_s'] for r in runs):,.0f})")
            if args.latency > 0:
                lat = await latency(server.dsn, args.latency)
                print(f"LATENCY enqueue->start over {len(lat)} jobs: p50 {pct(lat, 50):.2f} ms, "
                      f"p95 {pct(lat, 95):.2f} ms, p99 {pct(lat, 99):.2f} ms, max {max(lat):.2f} ms", flush=True)

        if not args.skip_history:
            hist = []
            for i in range(args.runs):
                r = await throughput(server.dsn, args.jobs, history=True)
                hist.append(r)
                print(f"  history run {i + 1}: {r['jobs_per_s']:,.0f} jobs/s launch->done, "
                      f"{r['steady_per_s']:,.0f} steady", flush=True)
            with_hist = statistics.median(r["jobs_per_s"] for r in hist)
            cost = f" ({(1 - with_hist / base) * 100:.1f} % below {base:,.0f})" if base else ""
            print(f"WITH HISTORY median {with_hist:,.0f} jobs/s{cost}")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
