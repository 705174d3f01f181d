"""Types at a glance on a large table (no Qt): what `jobdesk types --json` and GET /api/types read.

    python benchmarks/glance_bench.py [--jobs 1000000] [--types 8] [--running 200]

Fills a private embedded PostgreSQL with `--jobs` queued jobs spread over `--types` types (the
worst case for the queued counts: every job is ready to run) and `--running` jobs in progress, a
type limit on each type, and the 5-second rollup of the last 10 minutes as the workers leave it
(through their own writer). Then it times the glance (`type_activity`, every type), the whole
list as the service reads it (limits and glance), and, for comparison, the exact per-type counts
straight from `jobs`; and the rollup write of one second's fold of a busy worker, with and without
the 5-second rows.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import on_fresh_database
from jobdesk.store import rollup as stats_rollup
from jobdesk.store import type_activity, type_controls
from jobdesk.store.db import connect

CHUNK = 250_000


async def fill(conn: asyncpg.Connection, args: argparse.Namespace) -> list[str]:
    t0 = time.perf_counter()
    for first in range(0, args.jobs, CHUNK):
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'type.' || (g % $3), '{}'::jsonb "
                           "FROM generate_series($1::int, $2::int) g", first, min(args.jobs, first + CHUNK) - 1,
                           args.types)
    await conn.execute("UPDATE jobs SET status = 'in_progress', started_at = now(), attempts = 1 "
                       "WHERE id IN (SELECT id FROM jobs ORDER BY seq LIMIT $1)", args.running)
    types = [f"type.{i}" for i in range(args.types)]
    await conn.execute("INSERT INTO type_limits (type, max_running) SELECT unnest($1::text[]), 50", types)
    now = time.time()
    rollup = stats_rollup.Rollup()
    for t in types:
        for s in range(0, 600, 1):
            rollup.attempt_ended(t, 0.01, 0.1, completed=True, at=now - s)
            if s % 7 == 0:
                rollup.attempt_ended(t, 0.01, 0.1, attempt_failed=True, at=now - s)
    await stats_rollup.write(conn, rollup.take())
    await conn.execute("VACUUM ANALYZE jobs")
    print(f"filled {args.jobs:,} queued jobs of {args.types} types, {args.running} running, in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return types


async def timed(what: str, fn: Callable[[], Awaitable[Any]], runs: int = 9) -> Any:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = await fn()
        times.append((time.perf_counter() - t0) * 1000)
    print(f"  {what:<58} median {statistics.median(times):7.2f} ms  (max {max(times):.2f})", flush=True)
    return result


def busy_fold(types: list[str], with_fives: bool) -> stats_rollup.Fold:
    """What a worker finishing 1,000 jobs a second over these types folds in one second."""
    rollup = stats_rollup.Rollup()
    now = time.time()
    for i in range(1000):
        rollup.attempt_ended(types[i % len(types)], 0.01, 0.05 + (i % 40) * 0.01, completed=True, at=now)
    fold = rollup.take()
    if not with_fives:
        fold.fives.clear()
    return fold


async def measure(dsn: str, args: argparse.Namespace) -> None:
    conn = await connect(dsn)
    try:
        types = await fill(conn, args)
        got = await timed("type_activity, every type (capped at 10,000 queued)",
                          lambda: type_activity.type_activity(conn, types))
        first = got[types[0]]
        print(f"    {types[0]}: running {first.running}, queued {first.queued:,}"
              f"{'+' if first.queued_capped else ''}, finished in 5 min {sum(first.throughput):,}")
        await timed("list_types + type_activity (the service's types())", lambda: _listed(conn))
        print("for comparison, straight from jobs:")
        await timed("exact queued and running per type from jobs", lambda: conn.fetch(
            "SELECT type, count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'in_progress') "
            "FROM jobs GROUP BY type"), runs=3)
        print("the workers' rollup write, one second of 1,000 jobs:")
        for with_fives in (False, True):
            label = "with the 5-second rows" if with_fives else "without the 5-second rows"
            await timed(f"rollup.write {label}", lambda w=with_fives: stats_rollup.write(conn, busy_fold(types, w)),
                        runs=31)
    finally:
        await conn.close()


async def _listed(conn: asyncpg.Connection) -> object:
    records = await type_controls.list_types(conn)
    return await type_activity.type_activity(conn, [r.type for r in records])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--types", type=int, default=8)
    parser.add_argument("--running", type=int, default=200)
    args = parser.parse_args()
    on_fresh_database(lambda dsn: measure(dsn, args))


if __name__ == "__main__":
    main()
