"""Retention: the settings, what the pruner keeps, batches, dry runs, `jobdesk prune` and the lease.

Completed jobs go a partition at a time (sql/041): each test that ages them first makes the
partitions a database that has run for a while has (`history_partitions`), so that a job
completed ten days ago and one completed six days ago are in different partitions."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import pytest

from jobdesk.core.durations import parse_duration
from jobdesk.core.errors import SettingsError
from jobdesk.core.settings import load_settings
from jobdesk.processors.builtin import EchoProcessor
from jobdesk.runtime import retention
from jobdesk.service.jobs import JobService
from tests.helpers import RunningWorker, history_partitions, run_cli, wait_for

DAY = 86400.0
KEEP = {"completed": 7 * DAY, "cancelled": 7 * DAY, "failed": 30 * DAY, "audit": 90 * DAY}


async def old_job(conn: asyncpg.Connection, status: str, days: float, *, pipeline: str | None = None,
                  deps: list[str] | None = None) -> str:
    """A job in `status` that last changed `days` ago (and whose retention started then)."""
    return await conn.fetchval("""
        INSERT INTO jobs (type, input_data, status, is_active, pipeline_id, dependent_on_jobs, updated_at,
                          completed_at, retain_from)
        VALUES ('echo', '{}', $1::varchar, $1::varchar NOT IN ('completed', 'failed', 'cancelled'), $2, $3::jsonb,
                now() - make_interval(days => $4::int), now(), now() - make_interval(days => $4::int)) RETURNING id""",
        status, pipeline, deps or [], int(days))


async def ids(conn: asyncpg.Connection) -> set[str]:
    return {r["id"] for r in await conn.fetch("SELECT id FROM jobs")}


async def prune(dsn: str, **kwargs: object) -> retention.PruneResult | None:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        return await retention.prune(pool, "test", {**KEEP}, failed_retention=KEEP["failed"], **kwargs)  # type: ignore[arg-type]
    finally:
        await pool.close()


def test_durations_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_duration("90s") == 90 and parse_duration("12h") == 43200 and parse_duration("7d") == 7 * DAY
    assert parse_duration("forever") is None
    s = load_settings()
    assert (s.JOB_RETENTION_COMPLETED, s.JOB_RETENTION_CANCELLED, s.JOB_RETENTION_FAILED,
            s.JOB_RETENTION_AUDIT) == (7 * DAY, 7 * DAY, 30 * DAY, 90 * DAY)
    monkeypatch.setenv("JOB_RETENTION_FAILED", "forever")
    assert load_settings().JOB_RETENTION_FAILED is None
    for bad in ("7 days", "0s", "-1d", "12"):
        monkeypatch.setenv("JOB_RETENTION_AUDIT", bad)
        with pytest.raises(SettingsError, match="^invalid setting JOB_RETENTION_AUDIT: "):
            load_settings()


def test_a_malformed_retention_is_one_line_naming_it(dsn: str) -> None:
    result = run_cli("jobs", dsn=dsn, JOB_RETENTION_COMPLETED="a week")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "JOB_RETENTION_COMPLETED" in result.stderr


async def test_pipelines_and_dependants_with_unfinished_jobs_are_kept(dsn: str, conn: asyncpg.Connection) -> None:
    await history_partitions(conn, 30, 9, 5, 2)
    kept, gone = set(), set()
    # A pipeline with a queued job, one waiting for approval, one with a recent failure: kept whole.
    for live in ("queued", "waiting_approval", "in_progress"):
        p = f"p-{live}"
        kept |= {await old_job(conn, "completed", 10, pipeline=p), await old_job(conn, live, 10, pipeline=p)}
    kept |= {await old_job(conn, "completed", 10, pipeline="p-failed"),
             await old_job(conn, "failed", 3, pipeline="p-failed")}
    # A finished pipeline, and one whose failure is past its own retention: gone whole.
    gone |= {await old_job(conn, "completed", 10, pipeline="p-done"),
             await old_job(conn, "cancelled", 8, pipeline="p-done")}
    gone |= {await old_job(conn, "completed", 40, pipeline="p-old"),
             await old_job(conn, "failed", 31, pipeline="p-old")}
    # Recent enough: kept.
    kept |= {await old_job(conn, "completed", 6), await old_job(conn, "failed", 29),
             await old_job(conn, "cancelled", 6)}
    # A parent outside any pipeline with a queued child is kept; one whose child is done goes,
    # and the child stays as it was.
    parent = await old_job(conn, "completed", 10)
    kept |= {parent, await old_job(conn, "queued", 10, deps=[parent])}
    done_parent = await old_job(conn, "completed", 10)
    child = await old_job(conn, "completed", 1, deps=[done_parent])
    kept.add(child)
    gone.add(done_parent)
    await conn.execute("INSERT INTO job_attempts (job_id, attempt, outcome) VALUES ($1, 1, 'failed')", done_parent)
    before = dict(await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", child))

    result = await prune(dsn)
    assert result is not None
    assert await ids(conn) == kept
    assert result.counts == {"completed": 3, "cancelled": 1, "failed": 1, "audit": 0}
    # The two partitions older than 7 days went; 5 completed jobs still needed (those of four
    # pipelines with an unfinished job, and a parent with a queued child) moved out first.
    assert len(result.dropped) == 2 and sum(d.kept for d in result.dropped) == 5
    assert dict(await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", child)) == before
    assert await conn.fetchval("SELECT count(*) FROM job_attempts") == 0, "attempts go with their job"
    assert await conn.fetchval("SELECT count(*) FROM job_dependencies WHERE depends_on_id = $1", done_parent) == 0


async def test_batches_dry_run_and_audit(dsn: str, conn: asyncpg.Connection) -> None:
    await history_partitions(conn, 7.5)
    await conn.execute("""
        INSERT INTO jobs (type, input_data, status, is_active, updated_at, retain_from)
        SELECT 'echo', '{}', 'completed', false, now() - interval '8 days', now() - interval '8 days'
          FROM generate_series(1, 25)""")
    await conn.execute("INSERT INTO audit_log (action, job_ids, at) VALUES "
                       "('cancel', '{}', now() - interval '91 days'), ('cancel', '{}', now())")
    dry = await prune(dsn, dry_run=True)
    assert dry is not None and dry.counts == {"completed": 25, "cancelled": 0, "failed": 0, "audit": 1}
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 25, "a dry run changes nothing"
    assert [d.name for d in dry.dropped] == ["jobs_completed_start"]
    real = await prune(dsn, batch=10)
    assert real is not None and real.counts == dry.counts
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0
    assert await conn.fetchval("SELECT to_regclass('jobs_completed_start')") is None, "the partition went"
    assert await conn.fetchval("SELECT count(*) FROM audit_log") == 1


async def test_batch_size_is_respected(dsn: str, conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failed and cancelled jobs are deleted in batches (completed ones go by partition)."""
    await conn.execute("""
        INSERT INTO jobs (type, input_data, status, is_active, updated_at)
        SELECT 'echo', '{}', 'cancelled', false, now() - interval '8 days' FROM generate_series(1, 25)""")
    sizes: list[int] = []
    real_batch = retention._batch

    async def counting(c: asyncpg.Connection, sql: str, *args: object) -> int:
        n = await real_batch(c, sql, *args)
        sizes.append(n)
        return n

    monkeypatch.setattr(retention, "_batch", counting)
    await prune(dsn, batch=10)
    assert sizes[:3] == [10, 10, 5], "each batch deletes at most `batch` rows, in its own transaction"


async def test_a_backlog_is_pruned_at_a_pace(dsn: str, conn: asyncpg.Connection) -> None:
    """Through a backlog the pruner rests between full batches, so deleting takes at most `pace`
    of the run; a run that finds less than a batch does not rest at all."""
    await conn.execute("""
        INSERT INTO jobs (type, input_data, status, is_active, updated_at)
        SELECT 'echo', '{}', 'cancelled', false, now() - interval '8 days' FROM generate_series(1, 3000)""")
    paced = await prune(dsn, batch=500, pace=0.25)
    assert paced is not None and paced.counts["cancelled"] == 3000
    # Six full batches, each followed by a rest three times its length; then one empty batch.
    assert paced.seconds >= 3 * paced.busy_seconds, (paced.seconds, paced.busy_seconds)

    await conn.execute("""
        INSERT INTO jobs (type, input_data, status, is_active, updated_at)
        SELECT 'echo', '{}', 'cancelled', false, now() - interval '8 days' FROM generate_series(1, 400)""")
    small = await prune(dsn, batch=500, pace=0.25)
    assert small is not None and small.counts["cancelled"] == 400
    assert small.seconds < small.busy_seconds + 0.5, "less than a batch: no rest"


async def test_prune_command(dsn: str, conn: asyncpg.Connection) -> None:
    await history_partitions(conn, 1.5)
    await old_job(conn, "completed", 2)
    await old_job(conn, "failed", 2)
    result = run_cli("prune", "--dry-run", "--older-than", "1d", "--status", "completed", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["completed", "1"] and "would delete 0 row(s)" in result.stdout
    assert "would drop partition jobs_completed_start (completed before " in result.stdout
    assert "): about 1 jobs" in result.stdout
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 2
    result = run_cli("prune", "--older-than", "1d", "--status", "completed", "failed", "--json", dsn=dsn)
    assert result.returncode == 0 and '"completed": 1' in result.stdout and '"failed": 1' in result.stdout
    assert '"partition": "jobs_completed_start"' in result.stdout
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0
    stats = run_cli("stats", dsn=dsn)  # what the last run did, as the console's status bar says it
    assert stats.returncode == 0, stats.stderr
    assert ": dropped 1 partition (≈ 1 completed jobs); deleted 1 failed" in stats.stdout
    for bad in (["--older-than", "soon"], ["--status", "queued"]):
        result = run_cli("prune", *bad, dsn=dsn)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, bad


async def test_two_pruners_never_run_at_once(dsn: str, conn: asyncpg.Connection) -> None:
    await history_partitions(conn, 9)
    await old_job(conn, "completed", 10)
    assert await retention.take_lease(conn, "worker-a", every_s=None)
    assert not await retention.take_lease(conn, "worker-b", every_s=None)
    assert await prune(dsn) is None, "the lease is held"
    result = run_cli("prune", dsn=dsn)
    assert result.returncode == 1 and "another pruner is running (worker-a)" in result.stderr
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 1
    # The holder dies: its lease runs out, and another takes over.
    await conn.execute("UPDATE jobdesk_leases SET expires_at = now() - interval '1 second'")
    assert await prune(dsn) is not None
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0
    # The fleet pruned just now: a worker waits for the interval, the command does not.
    assert not await retention.take_lease(conn, "worker-b", every_s=60)
    assert await retention.take_lease(conn, "worker-b", every_s=None)


async def test_racing_pruners_take_turns(dsn: str) -> None:
    conns = [await asyncpg.connect(dsn) for _ in range(4)]
    try:
        results = await asyncio.gather(*(retention.take_lease(c, f"w{i}", every_s=None)
                                         for i, c in enumerate(conns)))
        assert sum(results) == 1
    finally:
        for c in conns:
            await c.close()


async def test_the_pruner_runs_inside_a_worker(dsn: str, conn: asyncpg.Connection,
                                               caplog: pytest.LogCaptureFixture) -> None:
    await history_partitions(conn, 9)
    await old_job(conn, "completed", 10)
    caplog.set_level(logging.INFO, logger="jobdesk.retention")
    worker = RunningWorker(dsn, {"echo": EchoProcessor()}, JOB_PRUNE_INTERVAL=0.3)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 0 FROM jobs"), what="the old job to be pruned")
        await wait_for(lambda: asyncio.sleep(0, any("retention: pruned ~1 completed" in r.message
                                                    for r in caplog.records)), what="the log line")
    finally:
        await worker.stop()


async def test_service_refuses_an_unknown_status(dsn: str) -> None:
    async with await JobService.connect(dsn, source="cli", pool_size=2) as service:
        with pytest.raises(Exception, match="cannot prune 'queued'"):
            await service.prune(statuses=["queued"])


async def test_steps_go_with_their_job_and_old_events_go_too(dsn: str, conn: asyncpg.Connection) -> None:
    """A durable job's steps and wait are deleted with it; events are kept as long as completed jobs."""
    await history_partitions(conn, 7.5)
    job_id = await conn.fetchval("""
        INSERT INTO jobs (type, input_data, status, is_active, updated_at, retain_from)
        VALUES ('echo', '{}', 'completed', false, now() - interval '8 days', now() - interval '8 days') RETURNING id""")
    await conn.execute("INSERT INTO job_steps (job_id, name, result, attempt, started_at) "
                       "VALUES ($1, 's', '1', 1, now())", job_id)
    await conn.execute("INSERT INTO job_events (key, payload, created_at) VALUES "
                       "('old', '{}', now() - interval '8 days'), ('new', '{}', now())")
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        result = await retention.prune(pool, "test", {**KEEP, "events": 7 * DAY}, failed_retention=KEEP["failed"])
    finally:
        await pool.close()
    assert result is not None and result.counts["completed"] == 1 and result.counts["events"] == 1
    assert await conn.fetchval("SELECT count(*) FROM job_steps") == 0
    assert [r["key"] for r in await conn.fetch("SELECT key FROM job_events")] == ["new"]
