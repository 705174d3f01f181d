"""Console benchmark, offscreen: first rows over a million jobs, memory, event-loop lag and how
fast a committed change shows in the table while a worker is busy. Prints figures.

    python benchmarks/console_bench.py [--jobs 1000000] [--flow 20000] [--changes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

from benchmarks.harness import LoopLag, on_fresh_database, pct  # noqa: E402
from jobdesk.console.connection import ConsoleConnection  # noqa: E402
from jobdesk.console.main_window import MainWindow  # noqa: E402
from jobdesk.core.models import Status  # noqa: E402
from jobdesk.core.settings import load_settings  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def fill(dsn: str, n: int) -> None:
    """A million finished, failed and waiting jobs. None is queued: a worker claiming past a large
    backlog of types it does not serve is an engine limit of its own, not the console's."""
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.perf_counter()
        await conn.execute("""
            INSERT INTO jobs (type, input_data, status, error_message, retry_count, created_at, updated_at)
            SELECT (ARRAY['email.send', 'video.render', 'resize', 'echo'])[1 + g % 4],
                   jsonb_build_object('n', g),
                   (ARRAY['completed', 'completed', 'completed', 'failed', 'waiting_approval',
                          'cancelled'])[1 + g % 6],
                   CASE WHEN g % 6 = 3 THEN 'Error ' || g END, g % 3,
                   now() - make_interval(secs => $1 - g), now() - make_interval(secs => $1 - g)
              FROM generate_series(1, $1) g""", n)
        await conn.execute("VACUUM ANALYZE jobs")
        print(f"  filled {n:,} jobs in {time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        await conn.close()


async def measure(dsn: str, args: argparse.Namespace) -> None:
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn), embedded=False)
    window = MainWindow(connection)
    window.resize(1280, 800)
    window.show()
    t0 = time.perf_counter()
    connection.start()
    while window.model.rowCount() == 0:
        await asyncio.sleep(0.001)
    first_rows = time.perf_counter() - t0
    await window.refresh_counts()
    counted = time.perf_counter() - t0
    print(f"FIRST ROWS {first_rows * 1000:.0f} ms after connecting ({window.model.rowCount()} rows); "
          f"status counts {counted * 1000:.0f} ms", flush=True)
    for _ in range(10):  # scroll: ten more pages
        window.model.fetchMore()
        while window.model._loading is not None:
            await asyncio.sleep(0.005)
    print(f"  scrolled to {window.model.rowCount():,} rows", flush=True)

    # A worker completes noop jobs while we watch the loop and time visible changes.
    conn = await asyncpg.connect(dsn)
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'bench.noop', '{}' FROM generate_series(1, $1)",
                       args.flow)
    await conn.execute("INSERT INTO jobs (id, type, input_data) SELECT 'watch-' || g, 'never.served', '{}' "
                       "FROM generate_series(1, $1) g", args.changes)
    while window.model.row_of(f"watch-{args.changes}") is None:
        await asyncio.sleep(0.01)
    env = {**os.environ, "DATABASE_URL": dsn, "LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-m", "jobdesk.cli", "worker", "--processors",
                               "benchmarks.bench_processors"], env=env, cwd=ROOT)
    lag = LoopLag()
    lag.start()
    t_flow = time.perf_counter()
    await asyncio.sleep(1.0)
    seen: list[float] = []
    for i in range(1, args.changes + 1):
        job_id = f"watch-{i}"
        t = time.perf_counter()
        await conn.execute("UPDATE jobs SET status = 'failed', updated_at = now() WHERE id = $1", job_id)
        while True:
            row = window.model.row_of(job_id)
            if row is not None and window.model.row_at(row).status == Status.FAILED:  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.002)
        seen.append((time.perf_counter() - t) * 1000)
        await asyncio.sleep(0.05)
    done = await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'bench.noop' AND status = 'completed'")
    rate = done / (time.perf_counter() - t_flow)
    await lag.stop()
    worker.terminate()
    worker.wait(30)
    await conn.close()
    print(f"WORKER completed {done:,} jobs while measuring, {rate:,.0f} jobs/s", flush=True)
    print(lag.describe(), flush=True)
    print(f"CHANGE SHOWN p50 {pct(seen, 50):.0f} ms, p95 {pct(seen, 95):.0f} ms, max {max(seen):.0f} ms "
          f"over {len(seen)} changes", flush=True)
    print(f"RSS {rss_mb():.0f} MB", flush=True)
    window.close()
    await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--flow", type=int, default=200_000, help="noop jobs the worker completes meanwhile")
    parser.add_argument("--changes", type=int, default=100, help="status changes timed")
    args = parser.parse_args()

    async def everything(dsn: str) -> None:
        await fill(dsn, args.jobs)
        await measure(dsn, args)

    on_fresh_database(everything, qt=True)


if __name__ == "__main__":
    main()
