"""Claim benchmark: what one drain of a backlog costs the worker and PostgreSQL, and what the
claim's walk reads midway, with vacuum free to run or held back. Figures printed.

    python benchmarks/claim_walk_bench.py [--jobs 20000] [--runs 3] [--hold]

It starts its own embedded PostgreSQL (durable settings) in a temporary folder, and for each run
a fresh database: N no-op jobs inserted with one set INSERT, CHECKPOINT, then one worker process
with MAX_CONCURRENT_JOBS=10 drains them. Printed per run: jobs/s launch to done, the worker's
round trips (from its stop line), the CPU the worker and the server's processes used per job
(Linux: /proc; the worker and PostgreSQL share the machine's cores, so the sum is what bounds
the rate), and, once half the jobs are done, `EXPLAIN (ANALYZE, BUFFERS)` of one type's walk for
128 jobs from the type's first entry and from just below the lowest queued seq (where a walk
floor puts it). With --hold, a REPEATABLE READ transaction that read `jobs` stays open through
the drain, so the claimed jobs' index entries cannot be removed (docs/scale.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.engine_bench import PROCESSORS, fresh_db, insert_noops, stop_worker, worker_env  # noqa: E402
from tests import pg  # noqa: E402

WALK = ("SELECT ctid, priority, seq FROM jobs WHERE type = 'bench.noop' AND status = 'queued' AND pending_deps = 0"
        " AND is_active AND run_at IS NULL{floor} ORDER BY priority DESC, seq LIMIT 128")
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def server_cpu_s(postmaster: int) -> float | None:
    """CPU seconds of the server: the postmaster, its reaped children and its live ones (Linux)."""
    def fields(pid: int | str) -> list[str]:
        text = Path(f"/proc/{pid}/stat").read_text()
        return text[text.rindex(")") + 2:].split()

    try:
        total = sum(int(x) for x in fields(postmaster)[11:15])
    except OSError:
        return None
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                f = fields(entry)
            except OSError:
                continue
            if int(f[1]) == postmaster:
                total += int(f[11]) + int(f[12])
    return total / TICK


async def explain_walks(conn: asyncpg.Connection) -> dict[str, tuple[int, float]]:
    """Buffers and ms of the walk from the first entry and from a floor below the lowest queued seq."""
    low = await conn.fetchval("SELECT min(seq) FROM jobs WHERE status = 'queued'")
    out = {}
    for name, floor in (("from the first entry", ""), ("from a floor", f" AND priority = 0 AND seq >= {low}")):
        plan = json.loads(await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + WALK.format(floor=floor)))
        top = plan[0]
        out[name] = (top["Plan"]["Shared Hit Blocks"] + top["Plan"]["Shared Read Blocks"], top["Execution Time"])
    return out


async def drain(server_dsn: str, postmaster: int, n: int, hold: bool) -> dict[str, Any]:
    dsn = await fresh_db(server_dsn)
    conn = await asyncpg.connect(dsn)
    holder = await asyncpg.connect(dsn) if hold else None
    fd, name = tempfile.mkstemp(prefix="claim_walk_bench_", suffix=".log")
    os.close(fd)
    log = Path(name)
    try:
        await insert_noops(conn, n)
        await conn.execute("CHECKPOINT")
        if holder is not None:
            await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            await holder.fetchval("SELECT count(*) FROM jobs")
        cpu0, t0 = server_cpu_s(postmaster), time.time()
        with log.open("w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "jobdesk.cli", "worker", "--processors", PROCESSORS],
                                    env={**worker_env(dsn), "LOG_LEVEL": "INFO"}, cwd=ROOT, stdout=out,
                                    stderr=subprocess.STDOUT)
            walks = None
            try:
                while (left := await conn.fetchval("SELECT count(*) FROM jobs WHERE status <> 'completed'")) > 0:
                    if walks is None and left < n // 2:
                        walks = await explain_walks(conn)
                    if proc.poll() is not None:
                        raise RuntimeError(f"worker exited with {proc.returncode}")
                    await asyncio.sleep(0.25 if left > 1000 else 0.01)
                t1, cpu1 = time.time(), server_cpu_s(postmaster)
            finally:
                _, worker_cpu = stop_worker(proc)
        rounds = re.search(r"(\d+) round trip", log.read_text())
        return {"jobs_per_s": n / (t1 - t0), "rounds": int(rounds.group(1)) if rounds else None,
                "worker_us": worker_cpu * 1e6 / n,
                "server_us": (cpu1 - cpu0) * 1e6 / n if cpu0 is not None and cpu1 is not None else None,
                "walks": walks}
    finally:
        log.unlink(missing_ok=True)
        if holder is not None:
            await holder.close()
        await conn.close()
        await pg.drop_test_database(dsn)


def show(i: int, r: dict[str, Any]) -> str:
    server = f"{r['server_us']:.0f}" if r["server_us"] is not None else "n/a"
    walks = "; ".join(f"walk {k}: {b} buffers, {ms:.2f} ms" for k, (b, ms) in (r["walks"] or {}).items())
    return (f"  run {i}: {r['jobs_per_s']:,.0f} jobs/s launch->done, {r['rounds']} round trips, CPU per job:"
            f" worker {r['worker_us']:.0f} us + PostgreSQL {server} us; {walks}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hold", action="store_true", help="hold back vacuum through each drain")
    args = parser.parse_args()
    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        postmaster = int((server.pgdata / "postmaster.pid").read_text().split()[0])
        print(f"claim benchmark: {args.jobs:,} no-op jobs, MAX_CONCURRENT_JOBS=10, one worker, {os.cpu_count()} cores,"
              f" vacuum {'held back' if args.hold else 'free'}", flush=True)
        runs = []
        for i in range(args.runs):
            runs.append(await drain(server.dsn, postmaster, args.jobs, args.hold))
            print(show(i + 1, runs[-1]), flush=True)
        print(f"MEDIAN {statistics.median(r['jobs_per_s'] for r in runs):,.0f} jobs/s")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
