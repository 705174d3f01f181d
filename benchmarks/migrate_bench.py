"""`jobdesk migrate` to the partitioned `jobs` (migration 041) on a large table, clients running.

    python benchmarks/migrate_bench.py [--jobs 10000000] [--workers 2] [--rate 200]

On its own embedded PostgreSQL: a database at migration 040 (the last before `jobs` was
partitioned) holding N jobs, 97 % completed, 1 % failed, 1 % cancelled and 1 % a backlog of
queued ones (the newest). Then, while WORKERS connections claim and complete the backlog one job at a time, an
enqueuer inserts RATE jobs/s and a probe claims one job of its own every 10 ms, `jobdesk migrate`
runs as a subprocess. The clients speak plain SQL, as the workers of the release before 041 did
(today's worker needs the partitioned table).

Prints: the load time, the copy made ahead (rows, time), how long the swap held `jobs`, the
counts by status before and after (from `jobdesk migrate --json`), and how long claims were
blocked, two ways: the probe's claims that took over STALL_MS, summed; and every 10 ms, whether
any client backend waited on a lock (pg_stat_activity), summed. Goal: at most 1 s in all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import pct, private_server  # noqa: E402
from jobdesk.store.migrations import migrate  # noqa: E402
from tests import pg  # noqa: E402

CHUNK = 1_000_000
STALL_MS = 50.0  # a claim slower than this counts as blocked, all of its time
SAMPLE_S = 0.01
LOAD_SQL = """
INSERT INTO jobs (type, status, input_data, result_data, error_message, is_active, created_at, updated_at,
                  completed_at, attempts, started_at, worker_id)
SELECT CASE WHEN q THEN 'work' ELSE 'report' END,
       CASE WHEN q THEN 'queued' WHEN g % 100 = 1 THEN 'failed' WHEN g % 100 = 2 THEN 'cancelled' ELSE 'completed' END,
       CASE WHEN g % 10 = 0 THEN jsonb_build_object('n', g) ELSE '{}' END,
       CASE WHEN NOT q AND g % 100 > 2 THEN '{"ok": true}'::jsonb END,
       CASE WHEN NOT q AND g % 100 = 1 THEN 'boom' END, q OR g % 100 <> 2,
       t, t, CASE WHEN NOT q AND g % 100 > 2 THEN t END, (NOT q)::int, CASE WHEN NOT q THEN t END,
       CASE WHEN NOT q THEN 'old-worker' END
  FROM generate_series($1::bigint, $2::bigint) g,
       LATERAL (SELECT now() - (($3 - g) * interval '50 ms'), g > $3 * 0.99) s(t, q)
"""
CLAIM_SQL = """
UPDATE jobs SET status = 'in_progress', worker_id = $1, started_at = now(), attempts = attempts + 1,
                updated_at = now()
 WHERE id = (SELECT id FROM jobs WHERE type = $2 AND status = 'queued' AND pending_deps = 0 AND is_active
                AND run_at IS NULL ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id
"""
COMPLETE_SQL = "UPDATE jobs SET status = 'completed', completed_at = now(), updated_at = now() WHERE id = $1"
WAITING_SQL = """
SELECT count(*) FILTER (WHERE wait_event = 'relation'), count(*) FILTER (WHERE wait_event IN ('transactionid', 'tuple'))
  FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name = 'migrate-bench'
"""


@dataclass
class Clients:
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    claimed: int = 0
    enqueued: int = 0
    phase: str = "before"  # of the migration: before, during, after
    probe_ms: dict[str, list[float]] = field(default_factory=dict)  # by phase: each probe claim's time
    samples: dict[str, list[int]] = field(default_factory=dict)  # by phase: samples, on a table, on a row
    stretch: int = 0  # consecutive samples with a client waiting for a table's lock, now
    longest: int = 0  # ... and at most


async def client(dsn: str) -> asyncpg.Connection:
    return await asyncpg.connect(dsn, server_settings={"application_name": "migrate-bench"})


async def worker(dsn: str, name: str, state: Clients) -> None:
    conn = await client(dsn)
    try:
        while not state.stop.is_set():
            try:
                job = await conn.fetchval(CLAIM_SQL, name, "work")
            except asyncpg.SerializationError:  # a row it read moved to another partition: read again
                continue
            if job is None:
                await asyncio.sleep(0.05)
                continue
            await conn.execute(COMPLETE_SQL, job)
            state.claimed += 1
    finally:
        await conn.close()


async def enqueuer(dsn: str, rate: float, state: Clients) -> None:
    conn = await client(dsn)
    try:
        start = time.monotonic()
        while not state.stop.is_set():
            due = int((time.monotonic() - start) * rate) - state.enqueued
            if due > 0:
                await conn.execute("INSERT INTO jobs (type, input_data) "
                                   "SELECT 'work', '{}' FROM generate_series(1, $1)", due)
                state.enqueued += due
            await asyncio.sleep(0.01)
    finally:
        await conn.close()


async def probe(dsn: str, state: Clients) -> None:
    """Claims (and completes) a job of its own (200,000 loaded) every 10 ms; keeps how long each claim took."""
    conn = await client(dsn)
    try:
        while not state.stop.is_set():
            started = time.monotonic()
            try:
                job = await conn.fetchval(CLAIM_SQL, "probe", "probe")
            except asyncpg.SerializationError:  # a row it read moved to another partition: read again
                job = None
            state.probe_ms.setdefault(state.phase, []).append((time.monotonic() - started) * 1000)
            if job is not None:
                await conn.execute(COMPLETE_SQL, job)
            await asyncio.sleep(SAMPLE_S)
    finally:
        await conn.close()


async def sampler(dsn: str, state: Clients) -> None:
    """Every 10 ms: does a client backend wait for a table's lock; for a row's (an update of a
    job waits for the copy of its batch)? (Commits that NOTIFY also wait for one another on a lock
    of the database, with or without a migration: not counted.)"""
    conn = await asyncpg.connect(dsn)
    try:
        while not state.stop.is_set():
            table, row = await conn.fetchrow(WAITING_SQL)
            counts = state.samples.setdefault(state.phase, [0, 0, 0])
            counts[0] += 1
            counts[1] += bool(table)
            counts[2] += bool(row)
            state.stretch = state.stretch + 1 if table else 0
            state.longest = max(state.longest, state.stretch)
            await asyncio.sleep(SAMPLE_S)
    finally:
        await conn.close()


async def load(dsn: str, jobs: int) -> float:
    """A database at 040 holding `jobs` jobs; returns the seconds it took."""
    started = time.monotonic()
    conn = await asyncpg.connect(dsn)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for path in (ROOT / "sql").glob("0*.sql"):
                if int(path.name[:3]) < 41:
                    (folder / path.name).write_bytes(path.read_bytes())
            await migrate(conn, folder)
        for first in range(1, jobs + 1, CHUNK):
            await conn.execute(LOAD_SQL, first, min(first + CHUNK - 1, jobs), jobs)
            print(f"  loaded {min(first + CHUNK - 1, jobs):,} jobs", flush=True)
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'probe', '{}' FROM generate_series(1, 200000)")
        await conn.execute("VACUUM ANALYZE jobs")
    finally:
        await conn.close()
    return time.monotonic() - started


def run_migrate(dsn: str) -> tuple[dict[str, object], float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "jobdesk.cli", "migrate", "--json"], cwd=ROOT,
                          env={**os.environ, "DATABASE_URL": dsn}, stdout=subprocess.PIPE, check=True)
    return json.loads(proc.stdout), time.monotonic() - started


async def bench(server_dsn: str, jobs: int, workers: int, rate: float) -> None:
    admin = await asyncpg.connect(pg.with_database(server_dsn, "postgres"))
    await admin.execute("CREATE DATABASE migrate_bench")
    await admin.close()
    dsn = pg.with_database(server_dsn, "migrate_bench")
    print(f"loading {jobs:,} jobs into a database at migration 040...", flush=True)
    print(f"loaded in {await load(dsn, jobs):.1f} s", flush=True)

    state = Clients()
    tasks = [asyncio.create_task(worker(dsn, f"w{i}", state)) for i in range(workers)]
    tasks += [asyncio.create_task(enqueuer(dsn, rate, state)), asyncio.create_task(probe(dsn, state))]
    await asyncio.sleep(1)  # the clients at their pace
    tasks.append(asyncio.create_task(sampler(dsn, state)))
    first = state.claimed
    await asyncio.sleep(3)
    before = state.claimed
    state.phase = "during"
    print(f"{before - first:,} claims by the workers in 3 s; jobdesk migrate, clients running...", flush=True)
    report, took = await asyncio.to_thread(run_migrate, dsn)
    state.phase = "after"
    during_claims = state.claimed - before
    await asyncio.sleep(3)
    after = state.claimed
    state.stop.set()
    await asyncio.gather(*tasks)
    print_figures(report, took, during_claims, after - before - during_claims, state)


def print_figures(report: dict[str, object], took: float, during: int, after: int, state: Clients) -> None:
    copy = report.get("copied_ahead")
    print(f"\napplied: {report['applied']}; jobdesk migrate took {took:.1f} s")
    if isinstance(copy, dict):
        print(f"copied ahead: {copy['copied_ahead']:,} of {copy['scanned']:,} rows looked at in "
              f"{copy['copy_seconds']:.1f} s ({copy['scanned'] / max(copy['copy_seconds'], 1e-9):,.0f} rows/s)")
        print(f"vacuum (analyze) of the copy: {copy['vacuum_seconds']:.1f} s")
        print(f"swap held jobs for {copy['swap_seconds'] * 1000:.0f} ms until its commit, which took "
              f"{copy['commit_seconds'] * 1000:.0f} ms ({copy['swap_tries']} tries; trigger made in "
              f"{copy['trigger_tries']} tries)")
        same = copy["counts_before"] == copy["counts_after"]
        print(f"counts by status before {copy['counts_before']}\n                 after  {copy['counts_after']}"
              f"\ncounts match: {'yes' if same else 'NO'}")
    else:
        print("no copy made ahead (the table was under the threshold)")
    print(f"claims during the migration: {during:,} by the workers; {after:,} by the workers in the 3 s after it; "
          f"{state.enqueued:,} jobs enqueued in all")
    for phase in ("before", "during", "after"):
        probes = state.probe_ms.get(phase) or [0.0]
        blocked = sum(ms for ms in probes if ms > STALL_MS)
        print(f"probe claims {phase} the migration: {len(probes):,}, ms p50 {pct(probes, 50):.1f}, p99 "
              f"{pct(probes, 99):.1f}, max {max(probes):.0f}; those over {STALL_MS:.0f} ms, summed: "
              f"{blocked / 1000:.2f} s")
    for phase in ("before", "during", "after"):
        n, table, row = state.samples.get(phase, [0, 0, 0])
        print(f"{phase} the migration, sampled every {SAMPLE_S * 1000:.0f} ms: a client waiting for a table's lock in "
              f"{table:,} of {n:,} samples (about {table * SAMPLE_S:.2f} s; goal: claims blocked <= 1 s), for a "
              f"row's in {row:,} (about {row * SAMPLE_S:.2f} s)")
    print(f"the longest stretch of samples with a client waiting for a table's lock: {state.longest} "
          f"(about {state.longest * SAMPLE_S * 1000:.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=200.0, help="jobs enqueued per second meanwhile")
    args = parser.parse_args()
    with private_server() as server:
        asyncio.run(bench(server.dsn, args.jobs, args.workers, args.rate))


if __name__ == "__main__":
    main()
