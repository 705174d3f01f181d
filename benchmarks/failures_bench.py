"""Failures view benchmark: the groups query, and the Failures tab's load in the console
(offscreen), over a million jobs of which 50,000 failed. Prints figures.

    python benchmarks/failures_bench.py [--jobs 1000000] [--failed 50000] [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

from benchmarks.harness import on_fresh_database  # noqa: E402
from jobdesk.console.connection import ConsoleConnection  # noqa: E402
from jobdesk.console.main_window import MainWindow  # noqa: E402
from jobdesk.core.fingerprint import fingerprint  # noqa: E402
from jobdesk.core.settings import load_settings  # noqa: E402
from jobdesk.service.jobs import JobService  # noqa: E402

ERRORS = [f"{kind}: upstream 'host-{{g}}' refused after {{g}} tries (code {i})" for i, kind in
          enumerate(["ConnectionError", "TimeoutError", "KeyError", "ValueError", "OSError"] * 4)]


async def fill(dsn: str, n: int, failed: int) -> None:
    """`n` jobs, every (n / failed)-th one failed with one of 20 errors; a failed attempt for
    each failed job over the last two days, and as many retried attempts in the last day."""
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.perf_counter()
        prints = [fingerprint(e.format(g=1)) for e in ERRORS]
        step = n // failed
        await conn.execute("""
            INSERT INTO jobs (type, input_data, status, error_message, error_fingerprint, created_at, updated_at)
            SELECT (ARRAY['email.send', 'video.render', 'resize', 'echo'])[1 + g % 4], jsonb_build_object('n', g),
                   CASE WHEN g % $2 = 0 THEN 'failed' ELSE 'completed' END,
                   CASE WHEN g % $2 = 0 THEN replace(($3::text[])[1 + g / $2 % 20], '{g}', g::text) END,
                   CASE WHEN g % $2 = 0 THEN ($4::text[])[1 + g / $2 % 20] END,
                   now() - make_interval(secs => ($1 - g) * 0.2), now() - make_interval(secs => ($1 - g) * 0.2)
              FROM generate_series(1, $1) g""", n, step, ERRORS, prints)
        await conn.execute("""
            INSERT INTO job_attempts (job_id, attempt, outcome, error_message, traceback, error_fingerprint,
                                      job_type, finished_at)
            SELECT id, 1, 'failed', error_message, 'Traceback (most recent call last): …', error_fingerprint, type,
                   now() - make_interval(secs => random() * 172800)
              FROM jobs WHERE status = 'failed'""")
        await conn.execute("""
            INSERT INTO job_attempts (job_id, attempt, outcome, error_message, traceback, error_fingerprint,
                                      job_type, finished_at)
            SELECT id, 1, 'failed', 'TimeoutError: took 31 s', 'Traceback …', 'TimeoutError: took <n> s', type,
                   now() - make_interval(secs => random() * 86400)
              FROM jobs WHERE status = 'completed' AND seq % $1 = 1""", step)
        await conn.execute("VACUUM ANALYZE jobs")
        await conn.execute("VACUUM ANALYZE job_attempts")
        attempts = await conn.fetchval("SELECT count(*) FROM job_attempts")
        if os.environ.get("EXPLAIN"):
            from jobdesk.store.failures import _groups_sql

            plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + _groups_sql(False), 24)
            print("\n".join(r[0] for r in plan), flush=True)
        print(f"  filled {n:,} jobs ({failed:,} failed) and {attempts:,} attempts in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        await conn.close()


async def measure(dsn: str, runs: int) -> None:
    settings = load_settings(DATABASE_URL=dsn)
    async with await JobService.connect(dsn, settings=settings, pool_size=2) as jobs:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            groups = await jobs.failure_groups()
            times.append((time.perf_counter() - t0) * 1000)
        print(f"GROUPS QUERY median {statistics.median(times):.0f} ms, max {max(times):.0f} ms over {runs} runs "
              f"({len(groups)} groups, {sum(g.failed_jobs for g in groups):,} failed jobs, "
              f"{sum(g.attempts for g in groups):,} attempts in 24 h)", flush=True)
        t0 = time.perf_counter()
        await jobs.failure_sample(groups[0].fingerprint)
        print(f"SAMPLE of the largest group {(time.perf_counter() - t0) * 1000:.0f} ms", flush=True)

    connection = ConsoleConnection(dsn, settings, embedded=False)
    window = MainWindow(connection)
    window.resize(1280, 800)
    window.show()
    connection.start()
    while not connection.is_connected:
        await asyncio.sleep(0.01)
    loads = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await window.failures.load()
        loads.append((time.perf_counter() - t0) * 1000)
    print(f"FAILURES TAB LOAD median {statistics.median(loads):.0f} ms, max {max(loads):.0f} ms over {runs} loads "
          f"({window.failures.model.rowCount()} rows shown)", flush=True)
    window.close()
    await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--failed", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    async def everything(dsn: str) -> None:
        await fill(dsn, args.jobs, args.failed)
        await measure(dsn, args.runs)

    on_fresh_database(everything, qt=True)


if __name__ == "__main__":
    main()
