"""`benchmarks/lifetime_bench.py --prune-jobs N`: what `jobdesk prune` costs on each side when
N completed jobs are past their retention.

On a fresh server per side: N completed jobs inserted through `jobs` by plain SQL (so that they
land wherever the side's schema routes them), finished between 2 and 3 days ago (on a partitioned
`jobs`, their retention started then too, in a partition for those days: see HISTORY_DAYS); VACUUM ANALYZE
(as autovacuum would have left them) and CHECKPOINT; then the side's
`jobdesk prune --older-than 1d --status completed`, timed from launch to exit, with the WAL it
wrote (the LSN before and after). The same command is run a second time, with nothing left to
prune: its wall time is the command's fixed cost (interpreter start, imports, connection).
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass

import asyncpg

from benchmarks.lifetime_sides import Side, jobs_size, leaf_count, lsn, mb, side_server
from tests.helpers import history_partitions

CHUNK = 1_000_000
PRUNE = ("prune", "--older-than", "1d", "--status", "completed")
LOAD = """
    INSERT INTO jobs (type, input_data, status, is_active, result_data, created_at, started_at, completed_at,
                      updated_at{retain})
    SELECT 'bench.old', jsonb_build_object('n', g), 'completed', false, '{{}}'::jsonb,
           f - interval '2 seconds', f - interval '1 second', f, f{retain_value}
      FROM generate_series($1::bigint + 1, $1 + $2) g,
           LATERAL (SELECT now() - interval '2 days' - interval '1 day' * (g::float8 / $3) AS f) t"""
# A partitioned `jobs` (sql/041) keeps completed jobs in partitions by the time their retention
# started: a database that ran those days has partitions for them, which its workers made ahead.
# A fresh one has one that ends when it was migrated: `history_partitions` makes it again to end
# 36 hours ago (the loaded jobs go there), with one more from then to the migration.
HISTORY_DAYS = 1.5  # after the last job loaded, more than the prune's 1 day ago


@dataclass
class PruneOutcome:
    loaded: int = 0
    size_before: int = 0
    size_after: int = 0
    leaves_before: int = 0
    leaves_after: int = 0
    seconds: float = 0.0
    wal: int = 0
    left: int = 0
    said: str = ""  # the command's last line
    again_seconds: float = 0.0  # the same command with nothing left to prune


async def load(conn: asyncpg.Connection, side: Side, n: int) -> None:
    """n completed jobs, a million a statement, finished evenly over the day that ended 2 days ago."""
    t0 = time.perf_counter()
    done = 0
    partitioned = await conn.fetchval("SELECT to_regclass('jobs_completed_start') IS NOT NULL")
    if partitioned:
        await history_partitions(conn, HISTORY_DAYS)
    load_sql = LOAD.format(retain=", retain_from" if partitioned else "", retain_value=", f" if partitioned else "")
    while done < n:
        step = min(CHUNK, n - done)
        await conn.execute(load_sql, done, step, n)
        done += step
        print(f"    {side.name}: {done:,} of {n:,} completed jobs loaded ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    await conn.execute("VACUUM ANALYZE")
    await conn.execute("CHECKPOINT")
    print(f"    {side.name}: vacuumed and checkpointed ({time.perf_counter() - t0:.0f} s)", flush=True)


def timed_prune(side: Side, dsn: str) -> tuple[float, str]:
    t = time.perf_counter()
    env = side.env(dsn, {"JOB_STATEMENT_TIMEOUT": "3600"})
    done = subprocess.run([sys.executable, "-m", "jobdesk", *PRUNE], env=env, cwd=side.checkout,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"{side.name}: jobdesk {' '.join(PRUNE)} exited {done.returncode}:\n"
                           f"{done.stdout}{done.stderr}")
    lines = done.stdout.strip().splitlines()
    return seconds, lines[-1] if lines else ""


async def prune_side(side: Side, n: int) -> PruneOutcome:
    out = PruneOutcome(loaded=n)
    async with side_server(side) as (dsn, _):
        conn = await asyncpg.connect(dsn)
        try:
            await load(conn, side, n)
            out.size_before, out.leaves_before = await jobs_size(conn), await leaf_count(conn)
            print(f"    {side.name}: jobdesk {' '.join(PRUNE)} ...", flush=True)
            wal0 = await lsn(conn)
            out.seconds, out.said = timed_prune(side, dsn)
            out.wal = await lsn(conn) - wal0
            out.left = await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'bench.old'")
            out.size_after, out.leaves_after = await jobs_size(conn), await leaf_count(conn)
            out.again_seconds, _ = timed_prune(side, dsn)
        finally:
            await conn.close()
    print(f"    {side.name}: pruned in {out.seconds:.2f} s, {mb(out.wal)} of WAL; it said: {out.said}", flush=True)
    return out


def report(sides: list[Side], outs: list[PruneOutcome]) -> None:
    """Side by side, then the goal (under 1 s and under 1 MB of WAL) for the last side."""
    print(f"\nPRUNE {outs[0].loaded:,} completed jobs finished 2-3 days ago: jobdesk {' '.join(PRUNE)}")
    rows = [
        ("wall time of the command", [f"{o.seconds:,.2f} s" for o in outs]),
        ("  same, nothing left", [f"{o.again_seconds:,.2f} s" for o in outs]),
        ("WAL written", [mb(o.wal) for o in outs]),
        ("jobs left of those", [f"{o.left:,}" for o in outs]),
        ("jobs + indexes before", [mb(o.size_before) for o in outs]),
        ("jobs + indexes after", [mb(o.size_after) for o in outs]),
        ("relations in jobs' tree", [f"{o.leaves_before} -> {o.leaves_after}" for o in outs]),
    ]
    print(f"{'':28}" + "".join(f"{s.name:>22}" for s in sides))
    for label, values in rows:
        print(f"{label:28}" + "".join(f"{v:>22}" for v in values))
    last = outs[-1]
    for what, ok in ((f"under 1 s ({last.seconds:.2f} s)", last.seconds < 1.0),
                     (f"under 1 MB of WAL ({mb(last.wal)})", last.wal < 2**20),
                     ("every old job gone", last.left == 0)):
        print(f"GOAL {sides[-1].name}: pruning {what}: {'met' if ok else 'short'}")
