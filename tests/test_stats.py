"""Queue metrics: the rollup the triggers keep, the numbers `fetch_metrics` reads from it, and
`jobdesk stats`, against a real database."""

from __future__ import annotations

import json

import asyncpg
import pytest

from tests.helpers import run_cli
from worker import stats_queries, transitions
from worker.models import JobCreate, ProcessorResult
from worker.stats_queries import WINDOWS, BadWindow, bin_bounds, parse_window, percentile

WORKER = "w-test"


async def _run_some(conn: asyncpg.Connection) -> None:
    """Through the worker's own transitions: 3 echo jobs complete, 1 fails for good after a retry,
    1 waits for approval, 2 stay queued."""
    await transitions.enqueue(conn, [JobCreate("echo", {"n": i}) for i in range(4)]
                              + [JobCreate("pdf", {"n": i}) for i in range(3)])
    _, claimed = await transitions.complete_and_claim(conn, WORKER, ["echo"], 4)
    assert len(claimed) == 4
    await conn.execute("SELECT pg_sleep(0.02)")
    done = [(job, ProcessorResult(result_data={"ok": True})) for job in claimed[:3]]
    await transitions.complete_batch(conn, WORKER, done)
    await transitions.fail_attempt(conn, WORKER, claimed[3], "boom", None, intervals=[0])
    _, again = await transitions.complete_and_claim(conn, WORKER, ["echo"], 1)
    await transitions.fail_attempt(conn, WORKER, again[0], "boom again", None, intervals=[0])
    _, pdf = await transitions.complete_and_claim(conn, WORKER, ["pdf"], 1)
    await transitions.complete_batch(conn, WORKER, [(pdf[0], ProcessorResult(result_data={},
                                                                            requires_approval=True))])


async def test_rollup_follows_the_transitions(conn: asyncpg.Connection) -> None:
    await _run_some(conn)
    metrics = await stats_queries.fetch_metrics(conn, WINDOWS["1h"])
    assert metrics.completed == 3 and metrics.failed == 1
    assert metrics.depth.now == {"completed": 3, "failed": 1, "waiting_approval": 1, "queued": 2}
    # The depth series ends at what is there now; an hour ago the queue was empty.
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


async def test_counts_agree_with_the_table(conn: asyncpg.Connection) -> None:
    """Inserts, updates, deletes and TRUNCATE all keep job_status_counts exact."""
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 't', '{}' FROM generate_series(1, 50)")
    await conn.execute("UPDATE jobs SET status = 'cancelled', is_active = false WHERE seq % 3 = 0")
    await conn.execute("DELETE FROM jobs WHERE seq % 5 = 0")
    actual = {r["status"]: r["n"] for r in await conn.fetch("SELECT status, count(*) AS n FROM jobs GROUP BY 1")}
    counted = {r["status"]: r["n"] for r in await conn.fetch(stats_queries.STATUS_COUNTS_SQL) if r["n"]}
    assert counted == actual
    await conn.execute("TRUNCATE jobs CASCADE")
    assert [r for r in await conn.fetch(stats_queries.STATUS_COUNTS_SQL) if r["n"]] == []


async def test_finished_rows_inserted_count_at_their_own_time(conn: asyncpg.Connection) -> None:
    await conn.execute("""
        INSERT INTO jobs (type, input_data, status, created_at, started_at, completed_at, updated_at)
        VALUES ('old', '{}', 'completed', now() - interval '3 hours 2 seconds', now() - interval '3 hours',
                now() - interval '3 hours' + interval '0.5 seconds', now())""")
    assert (await stats_queries.fetch_metrics(conn, WINDOWS["1h"])).completed == 0
    day = await stats_queries.fetch_metrics(conn, WINDOWS["24h"])
    assert day.completed == 1
    (old,) = day.latency
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
    await _run_some(conn)
    done = run_cli("stats", "--since", "1h", "--json", dsn=dsn)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["completed"] == 3 and out["failed"] == 1 and out["window"] == "1h"
    assert out["queue"]["queued"] == 2 and out["queue"]["waiting_approval"] == 1
    assert {t["type"] for t in out["types"]} == {"echo", "pdf"}
    assert out["table"]["total_bytes"] > 0
    text = run_cli("stats", dsn=dsn)
    assert text.returncode == 0, text.stderr
    assert "3 completed" in text.stdout and "1 failed" in text.stdout and "2 queued" in text.stdout
    assert "echo" in text.stdout and "WAIT P95" in text.stdout and "table jobs:" in text.stdout
    bad = run_cli("stats", "--since", "soon", dsn=dsn)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--since" in bad.stderr
