"""Trickle benchmark: what a steady, light stream of jobs costs one `jobdesk worker` in round trips.

    python benchmarks/trickle_bench.py [--seconds 60] [--rates 100,1000] [--batch 10]

A producer enqueues no-op jobs at a fixed rate, in batches of `--batch` jobs (one INSERT each)
every batch/rate seconds: 100 jobs/s is a batch of 10 every 100 ms, 1,000 jobs/s one every
10 ms. One worker process (MAX_CONCURRENT_JOBS=10) runs them. Printed per rate:

* round trips per job: the growth of the worker's `jobdesk_claim_round_trips_total` (statements
  that claimed jobs or recorded plain results, scraped from its /metrics) over the jobs run;
* pickup latency p50 / p99: from each job's enqueue (`created_at`) to its start (`started_at`),
  both stamped by PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
import urllib.request
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import engine_bench  # noqa: E402
from benchmarks.harness import on_fresh_database  # noqa: E402
from tests.helpers import free_port  # noqa: E402

_ROUND_TRIPS = re.compile(r"^jobdesk_claim_round_trips_total (\S+)$", re.MULTILINE)


def round_trips(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        match = _ROUND_TRIPS.search(answer.read().decode())
    if match is None:
        raise RuntimeError("the worker's /metrics has no jobdesk_claim_round_trips_total")
    return float(match.group(1))


async def produce(conn: asyncpg.Connection, rate: int, batch: int, seconds: float) -> int:
    """Enqueue `rate` jobs a second in batches, on schedule (a late batch does not shift the next)."""
    every = batch / rate
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'bench.noop', '{}' "
                           "FROM generate_series(1, $1)", batch)
        sent += batch
        await asyncio.sleep(max(0.0, started + (sent // batch) * every - time.monotonic()))
    return sent


async def one_rate(dsn: str, rate: int, batch: int, seconds: float) -> None:
    conn = await asyncpg.connect(dsn)
    port = free_port()
    engine_bench.WORKER_ARGS[:] = ["--metrics-port", str(port)]
    worker = engine_bench.launch_worker(dsn)
    try:
        deadline = time.monotonic() + 30
        while True:  # until it serves /metrics
            try:
                round_trips(port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the worker's first claims and its LISTEN
        before = round_trips(port)
        sent = await produce(conn, rate, batch, seconds)
        while await conn.fetchval("SELECT count(*) FROM jobs WHERE status <> 'completed'"):
            await asyncio.sleep(0.05)
        trips = round_trips(port) - before
        lat = await conn.fetchrow("""
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d) AS p50,
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY d) AS p99
              FROM (SELECT extract(epoch FROM started_at - created_at) * 1000 AS d FROM jobs) x""")
        print(f"{rate:>6} jobs/s in batches of {batch}: {sent:,} jobs, {trips:,.0f} round trips, "
              f"{trips / sent:.2f} per job; pickup latency p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms",
              flush=True)
        await conn.execute("DELETE FROM jobs")
    finally:
        engine_bench.stop_worker(worker)
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each producer runs")
    parser.add_argument("--rates", default="100,1000", help="jobs per second, comma-separated")
    parser.add_argument("--batch", type=int, default=10, help="jobs per INSERT")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]

    async def body(dsn: str) -> None:
        for rate in rates:
            await one_rate(dsn, rate, args.batch, args.seconds)

    print(f"trickle: one worker, MAX_CONCURRENT_JOBS=10, {args.seconds:.0f} s per rate", flush=True)
    on_fresh_database(body)


if __name__ == "__main__":
    main()
