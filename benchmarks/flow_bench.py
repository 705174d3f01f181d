"""Flow-control benchmark: what rate limits and fair share cost, as shares of the same run's
baseline, with one `jobdesk worker` (MAX_CONCURRENT_JOBS=10) on a private embedded PostgreSQL.

    python benchmarks/flow_bench.py [--jobs 20000] [--users 1000] [--per-user 100]
                                    [--backlog 100000] [--trickle-s 10] [--slow-ms 50] [--runs 3]

Figures, each on a fresh database:

* baseline: --jobs no-op jobs of an unlimited type, no limit configured (jobs/s);
* unlimited beside limited: the same jobs while as many jobs of a type with a rate limit of
  500/s wait on the same worker; jobs/s of the unlimited type, as a share of baseline (>= 0.95).
  These two run --runs times, interleaved, and their medians are compared (as FIFO and fair share);
* rate 1000/s: --jobs no-op jobs of a type limited to 1,000/s; starts per second over the whole
  seconds from the first start (from started_at), as a share of 1,000/s (>= 0.95 where the
  unlimited worker does more than 1,000/s), and the most starts seen in any one-second window;
* fair share: --users users with --per-user jobs each, claimed with JOB_FAIR_SHARE, as a share
  of the same jobs claimed oldest first (>= 0.80);
* fairness latency: user A has --backlog queued jobs of --slow-ms each; user B enqueues one job
  every 100 ms for --trickle-s seconds; B's queue wait (started_at - created_at) p50/p99, against
  the time of one of A's jobs plus 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.engine_bench import stop_worker, worker_env  # noqa: E402
from benchmarks.harness import pct  # noqa: E402
from jobdesk.embedded.server import EmbeddedServer  # noqa: E402
from tests import pg  # noqa: E402
from tests.helpers import set_autovacuum  # noqa: E402

PROCESSORS = "benchmarks.flow_bench_processors"


def launch(dsn: str, **settings: str) -> tuple[subprocess.Popen[bytes], object]:
    env = worker_env(dsn)
    env.update(settings)
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "jobdesk.cli", "worker", "--processors", PROCESSORS],
                            env=env, cwd=ROOT, stderr=log)
    return proc, log


async def wait_done(conn: asyncpg.Connection, proc: subprocess.Popen[bytes], where: str, limit_s: float = 900) -> float:
    """Seconds until no job matching `where` is queued or in progress."""
    start = time.time()
    while await conn.fetchval(f"SELECT count(*) FROM jobs WHERE status IN ('queued', 'in_progress') AND {where}"):
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited with {proc.returncode}")
        if time.time() - start > limit_s:
            raise RuntimeError(f"jobs left after {limit_s} s")
        await asyncio.sleep(0.02)
    return time.time() - start


async def fresh(server: EmbeddedServer) -> tuple[str, asyncpg.Connection]:
    dsn = await pg.create_test_database(server.dsn)
    conn = await asyncpg.connect(dsn)
    await set_autovacuum(conn, False)
    return dsn, conn


async def add_jobs(conn: asyncpg.Connection, job_type: str, n: int, users: int = 1) -> None:
    if users > 1:
        await conn.execute("INSERT INTO users (id, name) SELECT g, 'u' || g FROM generate_series(2, $1 + 1) g "
                           "ON CONFLICT DO NOTHING", users)
    # Users take turns in enqueue order: FIFO and fair share then see the same jobs in the same order.
    await conn.execute("""INSERT INTO jobs (type, user_id, input_data)
                          SELECT $1, CASE WHEN $3 > 1 THEN 2 + g % $3 ELSE 1 END, '{}'::jsonb
                            FROM generate_series(1, $2) g""", job_type, n, users)
    await conn.execute("VACUUM ANALYZE jobs")
    await conn.execute("CHECKPOINT")


def window_rates(starts: list[float]) -> tuple[float, int]:
    """Starts per second over the whole seconds from the first start, and the most starts in any
    one-second window."""
    whole = int(starts[-1] - starts[0]) or 1
    counted = sum(1 for t in starts if t < starts[0] + whole)
    j, most = 0, 0
    for i, t in enumerate(starts):
        while starts[j] <= t - 1:
            j += 1
        most = max(most, i - j + 1)
    return counted / whole, most


async def timed(server: EmbeddedServer, setup: dict[str, int], where: str, *, starts: list[float] | None = None,
                **settings: str) -> float:
    """jobs/s of the jobs matching `where`, after adding `setup` ({type: count}) and launching a
    worker; their start times (epoch seconds, sorted) go in `starts` when given."""
    dsn, conn = await fresh(server)
    proc = None
    try:
        users = setup.pop("users", 1)
        for job_type, n in setup.items():
            await add_jobs(conn, job_type, n, users)
        total = await conn.fetchval(f"SELECT count(*) FROM jobs WHERE {where}")
        proc, _log = launch(dsn, **settings)
        started = time.time()
        await wait_done(conn, proc, where)
        rate = total / (time.time() - started)
        if starts is not None:
            starts.extend(r["t"] for r in await conn.fetch(
                f"SELECT extract(epoch FROM started_at)::float8 AS t FROM jobs WHERE {where} ORDER BY started_at"))
        return rate
    finally:
        if proc is not None:
            stop_worker(proc)
        await conn.close()
        await pg.drop_test_database(dsn)


async def fairness_latency(server: EmbeddedServer, backlog: int, trickle_s: float, slow_ms: int) -> list[float]:
    """B's queue waits, in ms, behind A's backlog of slow jobs, with fair share."""
    dsn, conn = await fresh(server)
    proc = None
    try:
        await conn.execute("INSERT INTO users (id, name) VALUES (2, 'A'), (3, 'B')")
        await conn.execute("INSERT INTO jobs (type, user_id, input_data) "
                           "SELECT 'bench.slow', 2, '{}'::jsonb FROM generate_series(1, $1)", backlog)
        await conn.execute("VACUUM ANALYZE jobs")
        proc, _log = launch(dsn, JOB_FAIR_SHARE="bench.slow", BENCH_SLOW_S=str(slow_ms / 1000))
        await asyncio.sleep(3)  # the worker is up and busy
        end = time.monotonic() + trickle_s
        while time.monotonic() < end:
            await conn.execute("INSERT INTO jobs (type, user_id, input_data) VALUES ('bench.slow', 3, '{}')")
            await asyncio.sleep(0.1)
        await asyncio.sleep(1 + slow_ms / 1000)
        rows = await conn.fetch("SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms FROM jobs "
                                "WHERE user_id = 3")
        if any(r["ms"] is None for r in rows):
            raise RuntimeError("some of B's jobs never started")
        return [float(r["ms"]) for r in rows]
    finally:
        if proc is not None:
            stop_worker(proc)
        await conn.close()
        await pg.drop_test_database(dsn)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--per-user", type=int, default=100)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--trickle-s", type=float, default=10)
    parser.add_argument("--slow-ms", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3, help="runs of the cases compared with each other")
    args = parser.parse_args()
    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        n = args.jobs
        print(f"jobdesk flow-control benchmark: one worker, MAX_CONCURRENT_JOBS=10, {os.cpu_count()} cores", flush=True)
        bases, besides = [], []
        for _ in range(args.runs):  # interleaved: the machine's load changes along the run
            bases.append(await timed(server, {"bench.noop": n}, "type = 'bench.noop'"))
            besides.append(await timed(server, {"bench.noop": n, "bench.flow": n}, "type = 'bench.noop'",
                                       JOB_RATE_LIMITS="bench.flow=500/s"))
        base, beside = statistics.median(bases), statistics.median(besides)
        print(f"baseline (no limits)           {base:9,.0f} jobs/s  (median of {args.runs})", flush=True)
        print(f"unlimited beside rate-limited  {beside:9,.0f} jobs/s  {beside / base:5.2f} of baseline (>= 0.95)",
              flush=True)
        times: list[float] = []
        await timed(server, {"bench.flow": n}, "type = 'bench.flow'", starts=times, JOB_RATE_LIMITS="bench.flow=1000/s")
        rate, most = window_rates(times)
        print(f"rate limit 1000/s              {rate:9,.0f} starts/s  {rate / 1000:5.2f} of 1,000/s (>= 0.95); "
              f"most in any 1 s window: {most}", flush=True)
        total = args.users * args.per_user
        fifos, fairs = [], []
        for _ in range(args.runs):
            fifos.append(await timed(server, {"users": args.users, "bench.flow": total}, "true"))
            fairs.append(await timed(server, {"users": args.users, "bench.flow": total}, "true",
                                     JOB_FAIR_SHARE="bench.flow"))
        fifo, fair = statistics.median(fifos), statistics.median(fairs)
        print(f"FIFO, {args.users} users x {args.per_user}   {fifo:9,.0f} jobs/s", flush=True)
        print(f"fair share, same jobs          {fair:9,.0f} jobs/s  {fair / fifo:5.2f} of FIFO (>= 0.80)", flush=True)
        waits = await fairness_latency(server, args.backlog, args.trickle_s, args.slow_ms)
        print(f"fairness latency: B's wait behind {args.backlog:,} of A's {args.slow_ms} ms jobs, "
              f"{len(waits)} jobs: p50 {pct(waits, 50):.1f} ms, p99 {pct(waits, 99):.1f} ms, "
              f"max {max(waits):.1f} ms (bound {args.slow_ms + 10} ms)", flush=True)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
