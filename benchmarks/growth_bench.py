"""Cost as the table grows: throughput and enqueue with millions of finished jobs in `jobs`.

    python benchmarks/growth_bench.py [--history 10000000] [--jobs 20000] [--runs 3]

Two databases on one embedded PostgreSQL (durable commits): one clean, and one holding --history
finished jobs (90 % completed, 8 % failed with an error, 2 % cancelled, finished over the last 30
days, in 20 pipelines' worth of types), vacuumed and analysed as autovacuum would leave them.
Retention is off in the worker (`forever`), so nothing is pruned during a run.

Each round, alternating between the two databases, enqueues --jobs no-op jobs (one INSERT per row
in one transaction, as plain SQL sends them; then the same with one set INSERT) and times one
worker with MAX_CONCURRENT_JOBS=10 until they are done, from the first job's start (the steady
rate, so the worker's start-up does not count). The batch's rows are deleted afterwards,
so both databases keep their size. Printed: each run, then the medians and the grown database's
share of the clean one (targets: 0.9 for throughput and for enqueue).
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.engine_bench import run_batch  # noqa: E402
from benchmarks.harness import JOBS_SIZE_SQL  # noqa: E402
from tests import pg  # noqa: E402

RETENTION_OFF = {"JOB_RETENTION_COMPLETED": "forever", "JOB_RETENTION_FAILED": "forever",
                 "JOB_RETENTION_CANCELLED": "forever"}
CHUNK = 1_000_000


async def add_finished(conn: asyncpg.Connection, total: int) -> None:
    """`total` finished jobs, written in chunks so that progress shows and checkpoints keep up."""
    t0 = time.perf_counter()
    done = 0
    while done < total:
        n = min(CHUNK, total - done)
        await conn.execute("""
            INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs, status, result_data,
                              error_message, created_at, started_at, completed_at, retry_count)
            SELECT 'history.t' || (g % 20), 1, jsonb_build_object('n', g), '[]'::jsonb, s.status,
                   CASE WHEN s.status = 'completed' THEN '{"ok": true}'::jsonb END,
                   CASE WHEN s.status = 'failed' THEN 'boom ' || (g % 50) END,
                   f - interval '2 seconds', f - interval '1 second', f,
                   CASE WHEN s.status = 'failed' THEN 3 ELSE 0 END
              FROM generate_series($1::bigint, $2::bigint) g,
                   LATERAL (SELECT CASE WHEN g % 50 = 0 THEN 'cancelled'
                                        WHEN g % 50 < 5 THEN 'failed' ELSE 'completed' END AS status,
                                   now() - interval '30 days' * ((g % 100000) / 100000.0) AS f) s""",
                           done + 1, done + n)
        done += n
        print(f"    history: {done:,} finished jobs written ({time.perf_counter() - t0:.0f} s)", flush=True)
    await conn.execute("VACUUM ANALYZE jobs")
    size = await conn.fetchval(f"SELECT pg_size_pretty(({JOBS_SIZE_SQL}))")
    print(f"    history ready: {total:,} finished jobs, jobs table with its indexes {size}, "
          f"{time.perf_counter() - t0:.0f} s", flush=True)


async def one_round(dsn: str, n: int) -> dict[str, float]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await run_batch(conn, dsn, n, per_row=True, extra_env=RETENTION_OFF)
        await forget_batch(conn)
        bulk = await run_batch(conn, dsn, n, extra_env=RETENTION_OFF)
        await forget_batch(conn)
    finally:
        await conn.close()
    return {"per_row_enqueue": rows["enqueue_per_s"], "set_enqueue": bulk["enqueue_per_s"],
            "jobs_per_s": statistics.mean([rows["steady_per_s"], bulk["steady_per_s"]])}


async def forget_batch(conn: asyncpg.Connection) -> None:
    await conn.execute("DELETE FROM jobs WHERE type = 'bench.noop'")
    await conn.execute("VACUUM jobs")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=10_000_000)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        clean = await pg.create_test_database(server.dsn)
        grown = await pg.create_test_database(server.dsn)
        print(f"jobdesk growth benchmark: {args.jobs:,} no-op jobs per run, clean table against "
              f"{args.history:,} finished jobs, one worker, MAX_CONCURRENT_JOBS=10, retention off", flush=True)
        conn = await asyncpg.connect(grown)
        try:
            await add_finished(conn, args.history)
        finally:
            await conn.close()
        res: dict[str, list[dict[str, float]]] = {"clean": [], "grown": []}
        for i in range(args.runs):
            for name, dsn in (("clean", clean), ("grown", grown)):
                r = await one_round(dsn, args.jobs)
                res[name].append(r)
                print(f"  run {i + 1} {name:<5}: {r['jobs_per_s']:8,.0f} jobs/s processed (steady), enqueue "
                      f"{r['per_row_enqueue']:8,.0f} jobs/s per-row, {r['set_enqueue']:8,.0f} jobs/s set",
                      flush=True)
        for key, label in (("jobs_per_s", "THROUGHPUT"), ("per_row_enqueue", "ENQUEUE per-row"),
                           ("set_enqueue", "ENQUEUE set")):
            a = statistics.median(r[key] for r in res["clean"])
            b = statistics.median(r[key] for r in res["grown"])
            print(f"{label:<16} median clean {a:9,.0f}  with {args.history:,} finished {b:9,.0f}  "
                  f"share {b / a:.2f} (target 0.90)")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
