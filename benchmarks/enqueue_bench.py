"""Enqueue benchmark: independent no-op jobs by plain SQL, one INSERT per row, and in a batch.

    python benchmarks/enqueue_bench.py [--jobs 20000] [--runs 3]

On a private embedded PostgreSQL (durable settings), each measurement on a fresh database:

* per-row SQL: `INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs) VALUES (...)`
  for every job through asyncpg `executemany`, in one transaction, as a backend would write it
  (and as the peers' harness does with psycopg);
* batch: `JobClient.enqueue_many` with the same jobs (one statement).

jobs/s = N / the time of the call, commit included, measured after connecting. Median of the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import pg  # noqa: E402
from worker.models import JobCreate  # noqa: E402
from worker.service import JobService  # noqa: E402
from worker.settings import load_settings  # noqa: E402

INSERT = "INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs) VALUES ($1, $2, $3::jsonb, $4::jsonb)"


async def per_row(dsn: str, n: int) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        rows = [("bench.noop", 1, "{}", "[]") for _ in range(n)]
        t0 = time.perf_counter()
        async with conn.transaction():
            await conn.executemany(INSERT, rows)
        took = time.perf_counter() - t0
        assert await conn.fetchval("SELECT count(*) FROM jobs") == n
    finally:
        await conn.close()
    return n / took


async def batch(dsn: str, n: int) -> float:
    client = await JobService.connect(dsn, settings=load_settings(), pool_size=2)
    try:
        jobs = [JobCreate("bench.noop", {}) for _ in range(n)]
        t0 = time.perf_counter()
        await client.enqueue_many(jobs)
        took = time.perf_counter() - t0
    finally:
        await client.close()
    return n / took


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        print(f"jobdesk enqueue benchmark: {args.jobs:,} independent no-op jobs per call", flush=True)
        results: dict[str, list[float]] = {"per-row SQL (executemany)": [], "JobClient.enqueue_many": []}
        for i in range(args.runs):
            for name, fn in (("per-row SQL (executemany)", per_row), ("JobClient.enqueue_many", batch)):
                dsn = await pg.create_test_database(server.dsn)
                try:
                    rate = await fn(dsn, args.jobs)
                finally:
                    await pg.drop_test_database(dsn)
                results[name].append(rate)
                print(f"  run {i + 1} {name:<26} {rate:9,.0f} jobs/s", flush=True)
        for name, rates in results.items():
            print(f"{name:<26} median {statistics.median(rates):9,.0f} jobs/s")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
