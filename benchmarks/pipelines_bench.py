"""The pipeline list's queries on a large table (no Qt): how a screenful costs as jobs grow.

    python benchmarks/pipelines_bench.py [--jobs 1000000] [--size 5]

Fills a private embedded PostgreSQL with pipelines of `--size` jobs (mostly completed, some
failed, running or waiting), then times the first page, a deep page, the derived-status
filters, the live-update re-read of 50 pipelines, and one pipeline's graph.
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
from jobdesk.store.db import connect
from jobdesk.store.pipelines import (
    PipelineFilter,
    PipelineStatus,
    fetch_graph,
    fetch_pipeline_rows,
    fetch_pipelines,
)


async def fill(conn: asyncpg.Connection, jobs: int, size: int) -> None:
    t0 = time.perf_counter()
    await conn.execute("""
        INSERT INTO jobs (type, input_data, status, pipeline_id, created_at, updated_at)
        SELECT 'stage.' || (g % $2), jsonb_build_object('name', 'pipeline ' || (g / $2)),
               CASE WHEN g / $2 % 50 = 7 AND g % $2 = 1 THEN 'failed'
                    WHEN g > $1 - 20 * $2 THEN (ARRAY['queued', 'in_progress', 'waiting_approval'])[1 + g % 3]
                    ELSE 'completed' END,
               'pipe-' || (g / $2), now() - make_interval(secs => $1 - g), now() - make_interval(secs => $1 - g)
          FROM generate_series(0, $1 - 1) g""", jobs, size)
    await conn.execute("VACUUM ANALYZE jobs")
    print(f"filled {jobs:,} jobs in {jobs // size:,} pipelines in {time.perf_counter() - t0:.1f} s", flush=True)


async def timed(what: str, fn: Callable[[], Awaitable[Any]], runs: int = 5) -> Any:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = await fn()
        times.append((time.perf_counter() - t0) * 1000)
    print(f"  {what:<44} median {statistics.median(times):7.1f} ms  (max {max(times):.1f})", flush=True)
    return result


async def measure(dsn: str, args: argparse.Namespace) -> None:
    conn = await connect(dsn)
    try:
        await fill(conn, args.jobs, args.size)
        everything = PipelineFilter()
        rows, _ = await timed("first page (200 pipelines)", lambda: fetch_pipelines(conn, everything))
        deep = rows[-1].head_seq
        for _ in range(9):
            rows, _ = await fetch_pipelines(conn, everything, after_seq=deep)
            deep = rows[-1].head_seq
        await timed("page 11", lambda: fetch_pipelines(conn, everything, after_seq=deep))
        for status in (PipelineStatus.RUNNING, PipelineStatus.FAILED, PipelineStatus.COMPLETED):
            filt = PipelineFilter(statuses=frozenset({status}))
            await timed(f"first page, status {status.value}", lambda f=filt: fetch_pipelines(conn, f))
        await timed("first page, search 'pipeline 1234'",
                    lambda: fetch_pipelines(conn, PipelineFilter(search="pipeline 1234")), runs=2)
        ids = [r.pipeline_id for r in rows[:50]]
        await timed("live update: re-read 50 pipelines", lambda: fetch_pipeline_rows(conn, ids, everything))
        await timed("graph of one pipeline", lambda: fetch_graph(conn, ids[0]))
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=5, help="jobs per pipeline")
    args = parser.parse_args()
    on_fresh_database(lambda dsn: measure(dsn, args))


if __name__ == "__main__":
    main()
