"""Several worker processes against one database: atomic claims, each job runs exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import asyncpg

from tests.helpers import assert_no_job_lost, start_worker, wait_for

JOBS = 1000


async def test_two_workers_run_each_job_exactly_once(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'test.record', jsonb_build_object('n', g) "
                       "FROM generate_series(1, $1) g", JOBS)
    workers = [start_worker(dsn, "--processors", "cli_processors", log_path=tmp_path / f"w{i}.log",
                            RUN_LOG=str(runs), MAX_CONCURRENT_JOBS="10") for i in range(2)]
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = $1 FROM jobs WHERE status = 'completed'", JOBS),
                       timeout=120, what="all jobs to complete")
    finally:
        for proc in workers:
            proc.terminate()
        for proc in workers:
            assert proc.wait(30) == 0
    await assert_no_job_lost(conn, JOBS)
    lines = runs.read_text().split("\n")
    ids = Counter(line.split()[0] for line in lines if line)
    assert len(ids) == JOBS and max(ids.values()) == 1, "a job ran twice"
    pids = Counter(line.split()[1] for line in lines if line)
    assert len(pids) == 2, f"both workers took part: {pids}"
    assert await conn.fetchval("SELECT max(attempts) FROM jobs") == 1
    assert await conn.fetchval("SELECT count(*) FROM job_attempts") == 0
