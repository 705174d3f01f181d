"""Bulk retry benchmark, offscreen, in a real console window: retry 100,000 failed jobs by
filter (status failed), chunk by chunk, while a probe measures the event-loop lag the whole
time. Prints figures.

    python benchmarks/bulk_bench.py [--jobs 1000000] [--failed 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from benchmarks.harness import LoopLag, on_fresh_database  # noqa: E402
from jobdesk.console.connection import ConsoleConnection  # noqa: E402
from jobdesk.console.main_window import MainWindow  # noqa: E402
from jobdesk.core.models import Status  # noqa: E402
from jobdesk.core.settings import load_settings  # noqa: E402


async def fill(dsn: str, n: int, failed: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.perf_counter()
        await conn.execute("""
            INSERT INTO jobs (type, input_data, status, error_message, created_at, updated_at)
            SELECT (ARRAY['email.send', 'video.render', 'resize', 'echo'])[1 + g % 4], jsonb_build_object('n', g),
                   CASE WHEN g % ($1 / $2) = 0 THEN 'failed' ELSE 'completed' END,
                   CASE WHEN g % ($1 / $2) = 0 THEN 'Error ' || g END,
                   now() - make_interval(secs => $1 - g), now() - make_interval(secs => $1 - g)
              FROM generate_series(1, $1) g""", n, failed)
        await conn.execute("VACUUM ANALYZE jobs")
        print(f"  filled {n:,} jobs ({failed:,} failed) in {time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        await conn.close()


async def measure(dsn: str) -> None:
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn), embedded=False)
    window = MainWindow(connection)
    window.resize(1280, 800)
    window.show()
    connection.start()
    while not (connection.is_connected and window.bulk.writable and window.model.rowCount()):
        await asyncio.sleep(0.01)
    window.jobs.status_buttons[None].setChecked(False)
    window.jobs.status_buttons[Status.FAILED].setChecked(True)
    window.jobs.apply_filters()

    lag = LoopLag()
    lag.start()
    t0 = time.perf_counter()
    count = await window.bulk.confirm("retry", window.jobs.current_filter())
    counted = time.perf_counter() - t0
    box = window.bulk.confirm_box
    assert count is not None and box is not None
    print(f"DRY RUN {count.describe()} jobs in {counted * 1000:.0f} ms: {box.text().splitlines()[0]}", flush=True)
    t1 = time.perf_counter()
    box.button(QMessageBox.StandardButton.Yes).click()
    while window.bulk.run is None or window.bulk.run.outcome is None:
        await asyncio.sleep(0.01)
    total = time.perf_counter() - t1
    await asyncio.sleep(1.0)  # the live reloads the run caused, measured too
    await lag.stop()
    run = window.bulk.run
    print(f"RETRIED {run.done:,} jobs in {run.chunks} chunks: {total:.1f} s, {run.done / total:,.0f} jobs/s "
          f"({run.outcome})", flush=True)
    print(lag.describe(), flush=True)
    conn = await asyncpg.connect(dsn)
    audit = await conn.fetchval("SELECT count(*) FROM audit_log WHERE action = 'retry'")
    left = await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'failed'")
    await conn.close()
    print(f"  {audit} audit rows; {left} failed jobs left", flush=True)
    window.close()
    await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--failed", type=int, default=100_000)
    args = parser.parse_args()

    async def everything(dsn: str) -> None:
        await fill(dsn, args.jobs, args.failed)
        await measure(dsn)

    on_fresh_database(everything, qt=True)


if __name__ == "__main__":
    main()
