"""Queue metrics: the rollup the workers keep, the numbers `fetch_metrics` reads from it, and
`jobdesk stats`, against a real database and a real worker."""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import pytest

from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.store import rollup as stats_rollup
from jobdesk.store import stats as stats_queries
from jobdesk.store import transitions
from jobdesk.store.stats import WINDOWS, BadWindow, bin_bounds, parse_window, percentile
from tests.helpers import RunningWorker, run_cli, wait_for


class Sleepy(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        await asyncio.sleep(0.02)
        if job.input_data.get("fail"):
            raise RuntimeError("boom")
        return ProcessorResult(result_data={"ok": True}, requires_approval=bool(job.input_data.get("hold")))


async def _run_some(dsn: str, conn: asyncpg.Connection) -> None:
    """Through a real worker: 3 echo jobs complete, 1 fails for good after a retry, 1 pdf job
    waits for approval, and 2 jobs of a type no worker serves stay queued."""
    await transitions.enqueue(conn, [JobCreate("echo", {"n": i}) for i in range(3)]
                              + [JobCreate("echo", {"fail": True}), JobCreate("pdf", {"hold": True})]
                              + [JobCreate("nobody", {"n": i}) for i in range(2)])
    worker = RunningWorker(dsn, {"echo": Sleepy(), "pdf": Sleepy()}, JOB_RETRY_INTERVALS=[0.05])

    async def settled() -> bool:
        return await conn.fetchval("SELECT count(*) FROM jobs WHERE status IN ('completed', 'failed', "
                                   "'waiting_approval')") == 5
    await wait_for(settled, what="the worker to finish its jobs")
    await stats_rollup.sample_depth(conn)
    await worker.stop()  # a stopping worker writes what it holds


async def test_rollup_follows_a_worker(dsn: str, conn: asyncpg.Connection) -> None:
    await _run_some(dsn, conn)
    metrics = await stats_queries.fetch_metrics(conn, WINDOWS["1h"])
    assert metrics.completed == 3 and metrics.failed == 1
    assert metrics.depth.now == {"queued": 2, "in_progress": 0, "waiting_approval": 1}
    # The depth series ends at what is there now; before the first count the queue shows empty.
    assert metrics.depth.series["queued"][-1] == 2 and metrics.depth.series["queued"][0] == 0
    assert metrics.depth.series["waiting_approval"][-1] == 1
    assert metrics.depth.series["in_progress"][-1] == 0
    by_type = {lat.type: lat for lat in metrics.latency}
    # echo: 3 completed attempts + 2 failed ones; pdf: one attempt that ended waiting for approval.
    assert by_type["echo"].attempts == 5 and by_type["pdf"].attempts == 1
    echo = by_type["echo"]
    assert echo.run_p50 is not None and 0.015 <= echo.run_p50 <= 0.5, echo  # each ran about 20 ms
    assert echo.run_p95 is not None and echo.run_p95 >= echo.run_p50
    assert echo.wait_p50 is not None and echo.wait_p50 < 5
    # Every minute of the window is a point; the counts land in the last ones.
    assert len(metrics.throughput.times) == 61
    assert sum(metrics.throughput.per_minute(metrics.throughput.completed)) == 3
    # The tray's numbers come from the same rollup.
    attention = await stats_queries.fetch_attention(conn)
    assert attention.failed_last_hour == 1 and attention.waiting_approval == 1


async def test_depth_is_counted_once_a_minute_and_old_rows_go(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 't', '{}' FROM generate_series(1, 5)")
    await conn.execute("""
        INSERT INTO job_queue_depth VALUES (date_trunc('minute', now(), 'UTC') - interval '40 days', 'queued', 9),
                                           (date_trunc('minute', now(), 'UTC') - interval '20 minutes', 'queued', 7)""")
    await conn.execute("INSERT INTO job_stats (grain, bucket, type, completed) VALUES "
                       "('m', now() - interval '3 days', 't', 1), ('h', now() - interval '3 days', 't', 1)")
    assert await stats_rollup.sample_depth(conn) is True
    assert await stats_rollup.sample_depth(conn) is False  # this minute is counted: no second count
    rows = await conn.fetch("SELECT status, n FROM job_queue_depth WHERE bucket = date_trunc('minute', now(), 'UTC')")
    assert {r["status"]: r["n"] for r in rows} == {"queued": 5, "in_progress": 0, "waiting_approval": 0}
    assert await conn.fetchval("SELECT count(*) FROM job_queue_depth") == 4  # 40 days ago is gone
    assert [r["grain"] for r in await conn.fetch("SELECT grain FROM job_stats")] == ["h"]  # minutes: 2 days
    metrics = await stats_queries.fetch_metrics(conn, WINDOWS["1h"])
    queued = metrics.depth.series["queued"]
    assert queued[0] == 0 and 7 in queued and queued[-1] == 5  # counts carried over the minutes without one


async def test_a_fold_that_cannot_be_written_goes_with_the_next(conn: asyncpg.Connection) -> None:
    rollup = stats_rollup.Rollup()
    at = time.time() - 3600 * 3
    rollup.attempt_ended("old", 2.0, 0.5, completed=True, at=at)

    async def down(fn: object) -> None:
        raise ConnectionRefusedError("the database is away")
    with pytest.raises(ConnectionRefusedError):
        await stats_rollup.flush(down, rollup)
    rollup.attempt_ended("old", 2.0, 0.5, failed=True, at=at)

    async def up(fn):  # type: ignore[no-untyped-def]
        return await fn(conn)
    await stats_rollup.flush(up, rollup)
    assert not rollup.fold
    assert (await stats_queries.fetch_metrics(conn, WINDOWS["1h"])).completed == 0
    day = await stats_queries.fetch_metrics(conn, WINDOWS["24h"])
    assert day.completed == 1 and day.failed == 1
    (old,) = day.latency
    assert old.attempts == 2
    assert old.run_p50 is not None and 0.35 < old.run_p50 < 0.71  # 0.5 s, within its bin
    assert old.wait_p50 is not None and 1.4 < old.wait_p50 < 2.9  # 2 s


def test_percentiles_from_bins() -> None:
    assert percentile({}, 0.5) is None
    low, high = bin_bounds(10)
    assert low < percentile({10: 4}, 0.5) < high  # type: ignore[operator]
    assert percentile({1: 50, 20: 50}, 0.95) > bin_bounds(20)[0]  # type: ignore[operator]
    assert parse_window("15m").step.total_seconds() == 60
    assert parse_window("7d").counts_grain == "h" and parse_window("24h").hist_grain == "h"
    with pytest.raises(BadWindow):
        parse_window("yesterday")
    with pytest.raises(BadWindow):
        parse_window("90d")


async def test_stats_cli(dsn: str, conn: asyncpg.Connection) -> None:
    await _run_some(dsn, conn)
    done = run_cli("stats", "--since", "1h", "--json", dsn=dsn)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["completed"] == 3 and out["failed"] == 1 and out["window"] == "1h"
    assert out["queue"]["queued"] == 2 and out["queue"]["waiting_approval"] == 1
    assert {t["type"] for t in out["types"]} == {"echo", "pdf"}
    assert out["depth"]["queued"][-1] == 2
    assert out["table"]["total_bytes"] > 0
    text = run_cli("stats", dsn=dsn)
    assert text.returncode == 0, text.stderr
    assert "3 completed" in text.stdout and "1 failed" in text.stdout and "2 queued" in text.stdout
    assert "echo" in text.stdout and "WAIT P95" in text.stdout and "table jobs:" in text.stdout
    bad = run_cli("stats", "--since", "soon", dsn=dsn)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--since" in bad.stderr
