"""The Metrics tab's queries on a large table (no Qt): each chart's query at 1,000,000 jobs.

    python benchmarks/metrics_bench.py [--jobs 1000000] [--types 8]

Fills a private embedded PostgreSQL with `--jobs` jobs of `--types` types finished over the last
7 days (mostly completed, 3 % failed, 0.3 % queued, running or waiting), through plain
INSERTs, and adds them to the rollup through the workers' own writer (`stats_rollup`), with a
queue-depth count for every minute of the 7 days, as a fleet would have left it. Then it times, for
each window (1h, 24h, 7d), the query behind each chart (throughput and depth share one), the
whole `fetch_metrics` (of every type, and of one), the status bar's table size (estimated, and
counted as before the table's first analysis) and the tray's counts; and, for comparison,
the same percentiles computed straight from `jobs` for the 7-day window.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import on_fresh_database
from jobdesk.store import rollup as stats_rollup
from jobdesk.store.db import connect
from jobdesk.store.stats import (
    COUNTED_ROWS_CAP,
    COUNTS_SQL,
    DEPTH_SQL,
    HIST_HOURS_DAYS_SQL,
    HIST_SQL,
    STATUS_COUNTS_SQL,
    WINDOWS,
    chart_points,
    fetch_attention,
    fetch_metrics,
    fetch_table_size,
)

CHUNK = 100_000


async def fill(conn: asyncpg.Connection, jobs: int, types: int) -> None:
    t0 = time.perf_counter()
    span = 7 * 86400
    for first in range(0, jobs, CHUNK):
        last = min(jobs, first + CHUNK) - 1
        rows = await conn.fetch("""
            INSERT INTO jobs (type, input_data, status, created_at, started_at, completed_at, updated_at,
                              attempts)
            SELECT 'type.' || (g % $3), '{}'::jsonb, s.status, t.created, t.started,
                   CASE WHEN s.status = 'completed' THEN t.finished END,
                   CASE WHEN s.status IN ('queued') THEN t.created ELSE t.finished END, 1
              FROM generate_series($1::int, $2::int) g
             CROSS JOIN LATERAL (SELECT CASE WHEN g % 333 = 0 THEN
                                                 (ARRAY['queued', 'in_progress', 'waiting_approval'])[1 + g / 333 % 3]
                                            WHEN g % 33 = 0 THEN 'failed' ELSE 'completed' END AS status) s
             CROSS JOIN LATERAL (SELECT now() - make_interval(secs => $5 * (1 - g::float8 / $4)) AS finished) f
             CROSS JOIN LATERAL (SELECT f.finished - make_interval(secs => 0.01 + (g % 97) * 0.05) AS started) st
             CROSS JOIN LATERAL (SELECT st.started - make_interval(secs => (g % 61) * 0.2) AS created,
                                        st.started, f.finished) t
            RETURNING type, status, extract(epoch FROM updated_at)::float8 AS at,
                      extract(epoch FROM started_at - created_at)::float8 AS wait_s,
                      extract(epoch FROM updated_at - started_at)::float8 AS run_s""",
                                first, last, types, jobs, span)
        await stats_rollup.write_finished(conn, rows)
    await conn.execute("""
        INSERT INTO job_queue_depth (bucket, status, n)
        SELECT date_trunc('minute', now(), 'UTC') - make_interval(mins => m), s.status, (m * 7919) % 1000
          FROM generate_series(1, 7 * 1440) m CROSS JOIN unnest($1::text[]) s(status)""",
                       list(stats_rollup.QUEUE_STATUSES))
    await conn.execute("VACUUM ANALYZE jobs")
    await conn.execute("VACUUM ANALYZE job_stats")
    await conn.execute("VACUUM ANALYZE job_stats_hist")
    await conn.execute("VACUUM ANALYZE job_queue_depth")
    rollup = await conn.fetchval("SELECT (SELECT count(*) FROM job_stats) + (SELECT count(*) FROM job_stats_hist)"
                                 " + (SELECT count(*) FROM job_queue_depth)")
    print(f"filled {jobs:,} jobs of {types} types in {time.perf_counter() - t0:.1f} s "
          f"(rollup: {rollup:,} rows)", flush=True)


async def timed(what: str, fn: Callable[[], Awaitable[Any]], runs: int = 7) -> Any:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = await fn()
        times.append((time.perf_counter() - t0) * 1000)
    print(f"  {what:<48} median {statistics.median(times):7.1f} ms  (max {max(times):.1f})", flush=True)
    return result


async def measure(dsn: str, args: argparse.Namespace) -> None:
    conn = await connect(dsn)
    try:
        await fill(conn, args.jobs, args.types)
        await timed("queue depth now (counted through the status indexes)",
                    lambda: conn.fetch(STATUS_COUNTS_SQL))
        for label, window in WINDOWS.items():
            print(f"window {label}:")
            since = await conn.fetchval("SELECT now() - $1::interval", window.span)
            await timed(f"throughput (grain {window.counts_grain})",
                        lambda w=window, s=since: conn.fetch(COUNTS_SQL, w.counts_grain, s, None))
            start, points = chart_points(window, since, since + window.span)
            await timed("queue depth at each point", lambda w=window, s=start, p=points: conn.fetch(
                DEPTH_SQL, s, w.step, p, list(stats_rollup.QUEUE_STATUSES)))
            if window.hist_grain == "m":
                await timed("wait/run bins per type (minutes)",
                            lambda s=since: conn.fetch(HIST_SQL, "m", s, s + window.span + timedelta(minutes=1), None))
            else:
                midnight = await conn.fetchval("SELECT date_trunc('day', $1::timestamptz, 'UTC') + interval '1 day'",
                                               since)
                await timed("wait/run bins per type (hours, then days)",
                            lambda s=since, d=midnight: conn.fetch(HIST_HOURS_DAYS_SQL, s, d, None))
            metrics = await timed("fetch_metrics (all charts, one snapshot)",
                                  lambda w=window: fetch_metrics(conn, w))
            print(f"    completed {metrics.completed:,}, failed {metrics.failed:,}, "
                  f"{len(metrics.throughput.times)} points, {len(metrics.latency)} types", flush=True)
            one = metrics.latency[0].type if metrics.latency else "t0"
            await timed(f"fetch_metrics of one type ({one})", lambda w=window, t=one: fetch_metrics(conn, w, t))
        await timed("status bar: table size", lambda: fetch_table_size(conn))
        # A table never analysed (reltuples -1) is counted, up to COUNTED_ROWS_CAP rows, instead.
        await conn.execute("UPDATE pg_class SET reltuples = -1 WHERE oid = 'jobs'::regclass")
        size = await timed("status bar: table size, not analysed (counted)", lambda: fetch_table_size(conn))
        print(f"    counted {size.counted_rows:,} rows (cap {COUNTED_ROWS_CAP:,})", flush=True)
        await conn.execute("ANALYZE jobs")
        await timed("tray: failed last hour, waiting", lambda: fetch_attention(conn))
        print("for comparison, straight from jobs:")
        await timed("7d percentiles per type from jobs", lambda: conn.fetch("""
            SELECT type, percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY completed_at - started_at)
              FROM jobs WHERE completed_at >= now() - $1::interval GROUP BY type""", timedelta(days=7)), runs=2)
        await timed("1h completed per minute from jobs", lambda: conn.fetch("""
            SELECT date_trunc('minute', completed_at), count(*) FROM jobs
             WHERE completed_at >= now() - interval '1 hour' GROUP BY 1"""), runs=2)
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--types", type=int, default=8)
    args = parser.parse_args()
    on_fresh_database(lambda dsn: measure(dsn, args))


if __name__ == "__main__":
    main()
