"""Retention benchmark: a worker's throughput while the pruner deletes a million old jobs.

    python benchmarks/prune_bench.py [--old 1000000] [--jobs 20000]

On its own embedded PostgreSQL, in one database: OLD completed jobs (a tenth of them with a
failed attempt row) that finished ten days ago. Then, twice, N no-op jobs for one worker
(MAX_CONCURRENT_JOBS=10): first with nothing else running, then while `jobdesk prune` removes
the old jobs (the same code a worker's pruner runs: since sql/041 it drops their partition).
While the worker runs, pg_stat_activity is sampled every 20 ms for backends waiting on a lock
held by the pruner. Prints both throughputs, their ratio, the lock waits, and the table and
index sizes before pruning and after a VACUUM.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.engine_bench import PROCESSORS, insert_noops, stop_worker, worker_env  # noqa: E402
from benchmarks.harness import fresh_database, private_server  # noqa: E402
from tests import pg  # noqa: E402

TABLES = ("jobs", "job_attempts", "job_dependencies")


def launch_worker(dsn: str) -> subprocess.Popen[bytes]:
    # The measured worker prunes nothing itself: `jobdesk prune` is the pruner, started at a known time.
    env = {**worker_env(dsn), "JOB_RETENTION_COMPLETED": "forever"}
    return subprocess.Popen([sys.executable, "-m", "jobdesk.cli", "worker", "--processors", PROCESSORS],
                            env=env, cwd=ROOT)


async def sizes(conn: asyncpg.Connection) -> str:
    rows = await conn.fetch("""
        SELECT t, coalesce((SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree(t) WHERE isleaf),
                           pg_relation_size(t)) AS heap,
               coalesce((SELECT sum(pg_indexes_size(relid)) FROM pg_partition_tree(t) WHERE isleaf),
                        pg_indexes_size(t)) AS idx
          FROM unnest($1::regclass[]) t""",
        list(TABLES))
    return ", ".join(f"{r['t']} {r['heap'] / 2**20:,.0f} MB + indexes {r['idx'] / 2**20:,.0f} MB" for r in rows)


async def run_worker(conn: asyncpg.Connection, dsn: str, n: int, pruner_pid: int | None) -> tuple[float, int, int]:
    """N no-op jobs through one worker; returns jobs/s, lock-wait samples on the pruner, samples."""
    await insert_noops(conn, n)
    start = time.time()
    proc = launch_worker(dsn)
    waits = samples = 0
    try:
        while True:
            left = await conn.fetchval("SELECT count(*) FROM jobs WHERE status IN ('queued', 'in_progress') "
                                       "AND type = 'bench.noop'")
            if left == 0:
                break
            blocked = await conn.fetchval("""
                SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'
                   AND $1::int = ANY (pg_blocking_pids(pid))""", pruner_pid or 0)
            waits += blocked
            samples += 1
            await asyncio.sleep(0.02)
        done = time.time()
    finally:
        stop_worker(proc)
    return n / (done - start), waits, samples


async def bench(dsn: str, old: int, jobs: int) -> None:
    """OLD old completed jobs, then JOBS no-op jobs through a worker alone and while pruning."""
    conn = await asyncpg.connect(dsn)
    t0 = time.perf_counter()
    await conn.execute("""
        INSERT INTO jobs (type, input_data, status, is_active, result_data, updated_at, completed_at,
                          retain_from)
        SELECT 'bench.old', '{}', 'completed', false, '{"ok": true}',
               now() - interval '10 days', now() - interval '10 days', now() - interval '10 days'
          FROM generate_series(1, $1)""", old)
    await conn.execute("""
        INSERT INTO job_attempts (job_id, attempt, outcome, error_message)
        SELECT id, 1, 'failed', 'boom' FROM jobs TABLESAMPLE SYSTEM (10)""")
    await conn.execute("VACUUM ANALYZE")
    print(f"prune benchmark: {old:,} old completed jobs (made in {time.perf_counter() - t0:.0f} s), "
          f"{jobs:,} no-op jobs, {os.cpu_count()} cores", flush=True)
    print(f"BEFORE: {await sizes(conn)}", flush=True)

    alone, _, _ = await run_worker(conn, dsn, jobs, None)
    print(f"  worker alone: {alone:,.0f} jobs/s", flush=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith("JOB")}
    env.update({"DATABASE_URL": dsn, "PYTHONPATH": str(ROOT), "JOB_STATEMENT_TIMEOUT": "60"})
    p0 = time.perf_counter()
    # The old jobs are in the completed jobs' first partition, which ends when the database was made
    # (sql/041): retention past 1 s reaches it, and no partition the worker's jobs go to.
    pruner = subprocess.Popen([sys.executable, "-m", "jobdesk.cli", "prune", "--status", "completed",
                               "--older-than", "1s"],
                              env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    pid = None
    while pid is None and pruner.poll() is None:
        pid = await conn.fetchval("SELECT pid FROM pg_stat_activity WHERE application_name = 'jobdesk-cli' "
                                  "AND query LIKE '%DELETE FROM jobs%' LIMIT 1")
        await asyncio.sleep(0.01)
    left_at_start = await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'bench.old'")
    during, waits, samples = await run_worker(conn, dsn, jobs, pid)
    left_at_end = await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'bench.old'")
    out, _ = pruner.communicate(timeout=3600)
    prune_s = time.perf_counter() - p0
    print(f"  worker while pruning: {during:,.0f} jobs/s; old jobs {left_at_start:,} -> {left_at_end:,} "
          f"during the run", flush=True)
    print(f"  pruner: {out.strip().splitlines()[-1]} (wall {prune_s:.0f} s)")
    print(f"RATIO {during / alone:.2f} of the worker's throughput alone (target >= 0.80)")
    print(f"LOCK WAITS on the pruner: {waits} backend-samples in {samples} samples of the worker's run")
    await conn.execute("VACUUM")
    print(f"AFTER VACUUM: {await sizes(conn)}")
    await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=20_000)
    args = parser.parse_args()
    with private_server() as server:
        await pg.build_template(server.dsn)
        async with fresh_database(server.dsn) as dsn:
            await bench(dsn, args.old, args.jobs)


if __name__ == "__main__":
    asyncio.run(main())
