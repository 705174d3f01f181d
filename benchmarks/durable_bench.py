"""Durable processors benchmark: what a step costs, the claim behind many suspended jobs, and how
fast jobs waiting for events wake.

    python benchmarks/durable_bench.py [--jobs 20000] [--steps 10] [--count-jobs 1000]
                                       [--suspended 100000] [--waiters 10000] [--sleepers 200]
                                       [--quick] [--parts steps,suspended,sleep,wake]

It starts its own embedded PostgreSQL (durable settings) in a temporary folder, and a fresh
database for each measurement. Workers are `jobdesk worker` processes with
MAX_CONCURRENT_JOBS=10, as in the engine benchmark, serving benchmarks/durable_processors.py.

* steps: N jobs of 10 steps, each step a trivial function, against N jobs making the same 10
  calls without steps: jobs/s and steps/s of each, and the worker's CPU per job. Then the round
  trips per step, counted by a wrapper around every function of the durable store
  (worker/store/durable.py: one statement each) while an in-process worker runs `--count-jobs`
  step jobs; on a first attempt a step costs one INSERT and nothing else.
* suspended: `--suspended` jobs suspended by a real worker (half sleeping for 30 days, half
  waiting for events nobody emits), then N no-op jobs: the claim's throughput, as a share of the
  same run's baseline with no suspended jobs (a second database), median of 3 runs each,
  interleaved (1 with `--quick`).
* sleep: `--sleepers` jobs whose wakes are spread over 4 s: how late each sleep returned after
  the wake time it stored, p50, p99 and max, once on the worker that suspended them (its own
  timer) and once on a second worker started after the first stopped (its claim's poll).
* wake: `--waiters` jobs suspended by a worker, each waiting on its own key; the events of all
  the keys are emitted in one INSERT ... SELECT into job_events, and the time until every job
  has resumed and completed on that one worker is measured from just before the INSERT. Twice:
  once with the statistics of jobs and job_waits taken after the suspensions, once as
  autovacuum left them (on a fresh database, taken on the empty tables: the wake trigger's
  plan then depends on them).

`--quick` uses small sizes (2,000 jobs, 200 counted, 5,000 suspended, 1,000 waiters, 50 sleepers).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.engine_bench import stop_worker, worker_env  # noqa: E402
from jobdesk.core.settings import Settings  # noqa: E402
from jobdesk.embedded.server import EmbeddedServer  # noqa: E402
from tests import pg  # noqa: E402

PROCESSORS = "benchmarks.durable_processors"
TIMEOUT_S = 900.0
# A suspended job: queued, with a wake time, and the wait of its current attempt.
SUSPENDED = """
SELECT count(*) FROM jobs j JOIN job_waits w ON w.job_id = j.id AND w.attempt = j.attempts
 WHERE j.status = 'queued' AND j.run_at IS NOT NULL"""


@dataclass(frozen=True)
class Run:
    rate: float  # jobs/s, launch to all completed
    cpu_ms: float  # the worker's CPU per job


def launch(dsn: str, steps: int) -> subprocess.Popen[bytes]:
    env = worker_env(dsn)
    env["BENCH_STEPS"] = str(steps)
    return subprocess.Popen([sys.executable, "-m", "jobdesk.cli", "worker", "--processors", PROCESSORS],
                            env=env, cwd=ROOT)


async def wait_until(conn: asyncpg.Connection, sql: str, want: int, proc: subprocess.Popen[bytes] | None,
                     what: str, *args: Any) -> None:
    """Poll `sql` (a count) until it reaches `want`; fail if the worker exits or time runs out."""
    start = time.monotonic()
    while (n := await conn.fetchval(sql, *args)) < want:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the worker exited with {proc.returncode} while waiting for {what}")
        if time.monotonic() - start > TIMEOUT_S:
            raise RuntimeError(f"{what}: {n} of {want} after {TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.25 if want - n > 1000 else 0.01)


async def on_database(server: EmbeddedServer, body: Callable[[asyncpg.Connection, str], Awaitable[Any]]) -> Any:
    dsn = await pg.create_test_database(server.dsn)
    conn = await asyncpg.connect(dsn)
    try:
        return await body(conn, dsn)
    finally:
        await conn.close()
        await pg.drop_test_database(dsn)


async def add_jobs(conn: asyncpg.Connection, job_type: str, n: int) -> int:
    """N jobs of `job_type` by plain SQL; returns the seq they come after."""
    mark: int = await conn.fetchval("SELECT COALESCE(max(seq), 0) FROM jobs")
    await conn.execute("INSERT INTO jobs (type, user_id, input_data) SELECT $1, 1, '{}'::jsonb "
                       "FROM generate_series(1, $2)", job_type, n)
    await conn.execute("CHECKPOINT")
    return mark


async def throughput(conn: asyncpg.Connection, dsn: str, job_type: str, n: int, steps: int = 10) -> Run:
    """Launch a worker and time it through N queued jobs of `job_type`."""
    mark = await add_jobs(conn, job_type, n)
    start = time.time()
    proc = launch(dsn, steps)
    try:
        await wait_until(conn, "SELECT count(*) FROM jobs WHERE status = 'completed' AND seq > $1", n, proc,
                         f"{n:,} {job_type} jobs", mark)
        done = time.time()
    finally:
        _, cpu = stop_worker(proc)
    return Run(n / (done - start), 1000 * cpu / n)


# -- steps ---------------------------------------------------------------------------------------

STORE_CALLS = ("load_steps", "save_step", "take_event", "suspend", "emit_event", "records", "spawn")


@contextmanager
def counting_store() -> Iterator[Counter[str]]:
    """Count the calls of every function of the durable store (one statement each)."""
    from jobdesk.store import durable

    counts: Counter[str] = Counter()
    originals = {name: getattr(durable, name) for name in STORE_CALLS}

    def wrap(name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return await fn(*args, **kwargs)
        return counted

    for name, fn in originals.items():
        setattr(durable, name, wrap(name, fn))
    try:
        yield counts
    finally:
        for name, fn in originals.items():
            setattr(durable, name, fn)


async def count_round_trips(conn: asyncpg.Connection, dsn: str, n: int, steps: int) -> tuple[Counter[str], int]:
    """Run N step jobs on an in-process worker with the store counted; (calls by name, rows)."""
    os.environ["BENCH_STEPS"] = str(steps)
    from benchmarks.durable_processors import PROCESSOR_MAP
    from jobdesk.core.settings import load_settings
    from jobdesk.runtime.worker import Worker

    await add_jobs(conn, "bench.steps", n)
    with counting_store() as counts:
        worker = Worker(load_settings(DATABASE_URL=dsn, MAX_CONCURRENT_JOBS=10), dsn,
                        {t: c() for t, c in PROCESSOR_MAP.items()})
        task = asyncio.create_task(worker.run())
        try:
            await wait_until(conn, "SELECT count(*) FROM jobs WHERE status = 'completed'", n, None, "counted jobs")
        finally:
            worker.request_stop()
            await task
    rows: int = await conn.fetchval("SELECT count(*) FROM job_steps")
    return counts, rows


async def bench_steps(server: EmbeddedServer, n: int, counted: int, steps: int) -> None:
    print(f"STEPS: {n:,} jobs of {steps} steps (a trivial function each) against the same calls without steps",
          flush=True)
    plain = await on_database(server, lambda c, d: throughput(c, d, "bench.plain", n, steps))
    stepped = await on_database(server, lambda c, d: throughput(c, d, "bench.steps", n, steps))
    for name, run in (("without steps", plain), (f"{steps} steps", stepped)):
        print(f"  {name:<14} {run.rate:8,.0f} jobs/s  {run.rate * steps:9,.0f} calls/s  "
              f"worker CPU {run.cpu_ms:.3f} ms/job", flush=True)
    per_step = (1 / stepped.rate - 1 / plain.rate) / steps * 1000
    print(f"  the step jobs ran at {stepped.rate / plain.rate:.2f} of the plain jobs' rate: each step took "
          f"{per_step:.3f} ms of the worker's time (its 10 slots together), "
          f"{(stepped.cpu_ms - plain.cpu_ms) / steps:.3f} ms of its CPU")
    counts, rows = await on_database(server, lambda c, d: count_round_trips(c, d, counted, steps))
    total = sum(counts.values())
    by_name = ", ".join(f"{name} {k:,}" for name, k in sorted(counts.items())) or "none"
    print(f"  round trips: {counted:,} jobs x {steps} steps on an in-process worker: {total:,} calls of the "
          f"durable store ({by_name}), {total / (counted * steps):.2f} per step (target: at most 1); "
          f"{rows:,} steps stored", flush=True)


# -- suspended -----------------------------------------------------------------------------------

async def suspend_jobs(conn: asyncpg.Connection, dsn: str, sleeping: int, waiting: int,
                       key_prefix: str) -> float:
    """Enqueue jobs that sleep 30 days or wait for their own key, have a worker suspend them all,
    and stop it; returns suspensions per second."""
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data)
        SELECT 'bench.sleep', 1, '{"seconds": 2592000}'::jsonb FROM generate_series(1, $1)""", sleeping)
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data)
        SELECT 'bench.wait', 1, jsonb_build_object('key', $2::text || g) FROM generate_series(1, $1) g""",
                       waiting, key_prefix)
    start = time.time()
    proc = launch(dsn, 10)
    try:
        await wait_until(conn, SUSPENDED, sleeping + waiting, proc, "the suspensions")
        took = time.time() - start
    finally:
        stop_worker(proc)
    return (sleeping + waiting) / took


async def behind_suspended(base: asyncpg.Connection, base_dsn: str, conn: asyncpg.Connection, dsn: str, n: int,
                           suspended: int, runs: int) -> tuple[list[Run], list[Run], float]:
    """Suspend jobs in one database, then time the worker through no-op jobs there and in a
    clean database, `runs` times each, interleaved: the machine's moods fall on both alike."""
    rate = await suspend_jobs(conn, dsn, suspended // 2, suspended - suspended // 2, "never-")
    for c in (conn, base):
        await c.execute("VACUUM ANALYZE jobs")
        await c.execute("VACUUM ANALYZE job_waits")
    bases: list[Run] = []
    behinds: list[Run] = []
    for _ in range(runs):
        bases.append(await throughput(base, base_dsn, "bench.noop", n))
        behinds.append(await throughput(conn, dsn, "bench.noop", n))
    return bases, behinds, rate


def _rates(runs: list[Run]) -> str:
    return ", ".join(f"{r.rate:,.0f}" for r in runs)


async def bench_suspended(server: EmbeddedServer, n: int, suspended: int, runs: int) -> None:
    print(f"SUSPENDED: {n:,} no-op jobs claimed, with and without {suspended:,} suspended jobs of the worker's "
          f"own types (half sleeping 30 days, half waiting for events); {runs} runs each, interleaved", flush=True)
    bases, behinds, rate = await on_database(server, lambda b, bd: on_database(
        server, lambda c, d: behind_suspended(b, bd, c, d, n, suspended, runs)))
    base = statistics.median(r.rate for r in bases)
    behind = statistics.median(r.rate for r in behinds)
    print(f"  (a worker suspended the {suspended:,} jobs at {rate:,.0f} per second)")
    print(f"  baseline            {base:8,.0f} jobs/s (median of {_rates(bases)})", flush=True)
    print(f"  {suspended:,} suspended {behind:8,.0f} jobs/s (median of {_rates(behinds)})  "
          f"{behind / base:.0%} of the baseline (target: at least 90 %)", flush=True)


# -- sleep ---------------------------------------------------------------------------------------

# How late each sleep returned: from the wake time its checkpoint stored to the time it woke.
LATENESS = """
SELECT extract(epoch FROM (j.result_data->>'woke')::timestamptz - (s.result->>'until')::timestamptz) * 1000
  FROM jobs j JOIN job_steps s ON s.job_id = j.id AND s.name = '@sleep 1'
 WHERE j.type = 'bench.sleep' AND j.status = 'completed'"""


async def sleep_lateness(conn: asyncpg.Connection, dsn: str, n: int, other_worker: bool) -> list[float]:
    """N jobs sleeping 4 s, spread evenly (so wakes do not queue behind each other), woken by the
    worker that suspended them, or by a second worker started once the first has stopped (which
    finds them by its poll; their sleeps start 4 s later, so that it is up by then); the
    lateness of each, in ms."""
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data)
        SELECT 'bench.sleep', 1, jsonb_build_object('seconds', $2 + 4.0 * g / $1) FROM generate_series(1, $1) g""",
                       n, 6.0 if other_worker else 2.0)
    proc = launch(dsn, 10)
    try:
        if other_worker:
            await wait_until(conn, SUSPENDED, n, proc, "the suspensions")
            stop_worker(proc)
            proc = launch(dsn, 10)
        await wait_until(conn, "SELECT count(*) FROM jobs WHERE status = 'completed'", n, proc, "the wakes")
    finally:
        stop_worker(proc)
    return sorted(r[0] for r in await conn.fetch(LATENESS))


async def bench_sleep(server: EmbeddedServer, n: int) -> None:
    poll_ms = 1000 * Settings.model_fields["JOB_PROCESSOR_POLL_INTERVAL"].default  # the workers' (JOB* unset)
    print(f"SLEEP: {n:,} jobs, their wakes spread over 4 s: how late each sleep returned "
          f"(target: within JOB_PROCESSOR_POLL_INTERVAL + 50 ms = {poll_ms + 50:.0f} ms)", flush=True)
    for other, label in ((False, "on the worker that suspended them"), (True, "on another worker (its poll)")):
        late = await on_database(server, lambda c, d: sleep_lateness(c, d, n, other))
        p50, p99 = (late[min(len(late) - 1, int(q * len(late)))] for q in (0.5, 0.99))
        print(f"  {label:<34} p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  max {late[-1]:6.1f} ms  "
              f"({sum(x <= poll_ms + 50 for x in late) / len(late):.0%} within target)", flush=True)


# -- wake ----------------------------------------------------------------------------------------

async def wake(conn: asyncpg.Connection, dsn: str, waiters: int, analyze: bool) -> tuple[float, float, float]:
    """(suspensions/s, seconds of the emitting INSERT, seconds until every waiter completed).
    With `analyze`, the statistics are taken after the suspensions and before the emit."""
    await conn.execute("""
        INSERT INTO jobs (type, user_id, input_data)
        SELECT 'bench.wait', 1, jsonb_build_object('key', 'wake-' || g) FROM generate_series(1, $1) g""", waiters)
    start = time.time()
    proc = launch(dsn, 10)
    try:
        await wait_until(conn, SUSPENDED, waiters, proc, "the suspensions")
        rate = waiters / (time.time() - start)
        if analyze:
            await conn.execute("ANALYZE jobs")
            await conn.execute("ANALYZE job_waits")
        await asyncio.sleep(1)  # the worker idle again: its claim finds nothing
        t0 = time.perf_counter()
        await conn.execute("INSERT INTO job_events (key, payload) "
                           "SELECT 'wake-' || g, jsonb_build_object('n', g) FROM generate_series(1, $1) g", waiters)
        emitted = time.perf_counter() - t0
        await wait_until(conn, "SELECT count(*) FROM jobs WHERE status = 'completed'", waiters, proc, "the wake")
        done = time.perf_counter() - t0
    finally:
        stop_worker(proc)
    return rate, emitted, done


async def bench_wake(server: EmbeddedServer, waiters: int) -> None:
    print(f"WAKE: {waiters:,} jobs waiting on {waiters:,} keys, all emitted in one INSERT ... SELECT", flush=True)
    for analyze, label in ((True, "statistics taken after the suspensions"),
                           (False, "statistics as autovacuum left them")):
        rate, emitted, done = await on_database(server, lambda c, d: wake(c, d, waiters, analyze))
        print(f"  {label} (a worker suspended the jobs at {rate:,.0f} per second):")
        print(f"    the INSERT took {emitted:.2f} s; all {waiters:,} resumed and completed {done:.2f} s after it "
              f"began ({waiters / done:,.0f} jobs/s; target: within 5 s)", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, help="jobs per throughput run (default 20,000)")
    parser.add_argument("--steps", type=int, default=10, help="steps per job in the steps part")
    parser.add_argument("--count-jobs", type=int, help="step jobs whose round trips are counted (default 1,000)")
    parser.add_argument("--suspended", type=int, help="suspended jobs in the suspended part (default 100,000)")
    parser.add_argument("--waiters", type=int, help="waiting jobs in the wake part (default 10,000)")
    parser.add_argument("--sleepers", type=int, help="sleeping jobs in the sleep part (default 200)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check that the benchmark works")
    parser.add_argument("--parts", default="steps,suspended,sleep,wake", help="which parts to run, comma-separated")
    args = parser.parse_args()
    quick = args.quick
    jobs = args.jobs or (2_000 if quick else 20_000)
    counted = args.count_jobs or (200 if quick else 1_000)
    suspended = args.suspended or (5_000 if quick else 100_000)
    waiters = args.waiters or (1_000 if quick else 10_000)
    sleepers = args.sleepers or (50 if quick else 200)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if unknown := parts - {"steps", "suspended", "sleep", "wake"}:
        raise SystemExit(f"--parts: unknown part(s) {', '.join(sorted(unknown))}; use steps, suspended, sleep, wake")
    if min(jobs, counted, suspended, waiters, sleepers, args.steps) < 1:
        raise SystemExit("--jobs, --steps, --count-jobs, --suspended, --waiters and --sleepers must be at least 1")

    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        print(f"jobdesk durable processors benchmark: MAX_CONCURRENT_JOBS=10, one worker, {os.cpu_count()} cores, "
              f"durable commits{', quick sizes' if quick else ''}", flush=True)
        if "steps" in parts:
            await bench_steps(server, jobs, counted, args.steps)
        if "suspended" in parts:
            await bench_suspended(server, jobs, suspended, 1 if quick else 3)
        if "sleep" in parts:
            await bench_sleep(server, sleepers)
        if "wake" in parts:
            await bench_wake(server, waiters)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
