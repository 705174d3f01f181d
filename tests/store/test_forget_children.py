"""A deleted job takes its attempts, steps, wait, dependency edges, progress and log lines with it, by one trigger per
DELETE statement (sql/024_forget_children_per_statement.sql) in place of five cascading foreign
keys; TRUNCATE empties them too, a job's id cannot change, and the pruner's deletes still leave
the rows of jobs it keeps."""

from __future__ import annotations

import asyncpg
import pytest

from jobdesk.runtime.retention import prune

CHILD_COUNTS = """
SELECT (SELECT count(*) FROM job_attempts WHERE job_id = $1),
       (SELECT count(*) FROM job_steps WHERE job_id = $1),
       (SELECT count(*) FROM job_waits WHERE job_id = $1),
       (SELECT count(*) FROM job_dependencies WHERE job_id = $1 OR depends_on_id = $1),
       (SELECT count(*) FROM job_progress WHERE job_id = $1),
       (SELECT count(*) FROM job_logs WHERE job_id = $1)
"""


async def add_job_with_children(conn: asyncpg.Connection, job_id: str, parent: str) -> None:
    """A completed job that depends on `parent`, with one failed attempt, a step, a wait, its progress
    and a log line."""
    await conn.execute("INSERT INTO jobs (id, type, input_data, dependent_on_jobs) "
                       "VALUES ($1, 't', '{}', $2::text::jsonb)", job_id, f'["{parent}"]')
    await conn.execute("INSERT INTO job_attempts (job_id, attempt, outcome) VALUES ($1, 1, 'failed')", job_id)
    await conn.execute("INSERT INTO job_steps (job_id, name, attempt, started_at) VALUES ($1, 'a', 1, now())", job_id)
    await conn.execute("INSERT INTO job_waits (job_id, attempt, kind, until, step_name) "
                       "VALUES ($1, 1, 'sleep', now(), 'sleep#1')", job_id)
    await conn.execute("INSERT INTO job_progress (job_id, fraction) VALUES ($1, 0.5)", job_id)
    await conn.execute("INSERT INTO job_logs (job_id, attempt, seq, at, level, logger, message) "
                       "VALUES ($1, 1, 1, now(), 'INFO', 'job', 'a line')", job_id)


async def test_a_deleted_job_takes_its_rows_and_leaves_the_others(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('p', 't', '{}', 'completed')")
    for job_id in ("a", "b", "c"):
        await add_job_with_children(conn, job_id, "p")
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "a")) == (1, 1, 1, 1, 1, 1)
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "p")) == (0, 0, 0, 3, 0, 0)  # three edges point at p

    await conn.execute("DELETE FROM jobs WHERE id IN ('a', 'b')")  # one statement, two jobs
    for gone in ("a", "b"):
        assert tuple(await conn.fetchrow(CHILD_COUNTS, gone)) == (0, 0, 0, 0, 0, 0)
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "c")) == (1, 1, 1, 1, 1, 1)

    # Deleting the job others depend on removes the edges on its side too.
    await conn.execute("DELETE FROM jobs WHERE id = 'p'")
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "c")) == (1, 1, 1, 0, 1, 1)
    # A delete that matches nothing changes nothing.
    await conn.execute("DELETE FROM jobs WHERE id = 'nobody'")
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "c")) == (1, 1, 1, 0, 1, 1)


async def test_a_rolled_back_delete_keeps_the_rows(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('p', 't', '{}', 'completed')")
    await add_job_with_children(conn, "a", "p")
    tx = conn.transaction()
    await tx.start()
    await conn.execute("DELETE FROM jobs WHERE id = 'a'")
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "a")) == (0, 0, 0, 0, 0, 0)
    await tx.rollback()
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "a")) == (1, 1, 1, 1, 1, 1)


async def test_truncate_empties_the_rows_of_jobs(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('p', 't', '{}', 'completed')")
    await add_job_with_children(conn, "a", "p")
    await conn.execute("TRUNCATE jobs")
    for table in ("jobs", "job_attempts", "job_steps", "job_waits", "job_dependencies", "job_progress", "job_logs"):
        assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0, table


async def test_a_job_id_cannot_change(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('a', 't', '{}')")
    with pytest.raises(asyncpg.RestrictViolationError, match="a job's id cannot change \\(job a\\)") as err:
        await conn.execute("UPDATE jobs SET id = 'b' WHERE id = 'a'")
    assert err.value.sqlstate == "23001"
    await conn.execute("UPDATE jobs SET id = 'a', type = 'u' WHERE id = 'a'")  # the same id is no change
    assert await conn.fetchval("SELECT type FROM jobs WHERE id = 'a'") == "u"


async def test_the_pruner_deletes_old_jobs_with_their_rows_only(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('p', 't', '{}', 'completed')")
    await add_job_with_children(conn, "old", "p")
    await add_job_with_children(conn, "new", "p")
    await conn.execute("UPDATE jobs SET status = 'completed', pending_deps = 0")
    # Completed jobs go a partition at a time (sql/041): 'old' and 'p' move to the oldest one,
    # which ends when the database was made; 'new' stays in the newest.
    await conn.execute("UPDATE jobs SET retain_from = now() - interval '30 days' WHERE id IN ('old', 'p')")

    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        result = await prune(pool, "test", {"completed": 0.0}, failed_retention=None)
    finally:
        await pool.close()

    assert result is not None
    assert [d.name for d in result.dropped] == ["jobs_completed_start"]
    assert result.counts["completed"] == 2  # 'old' and 'p'; 'new' is in a partition that stays
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "old")) == (0, 0, 0, 0, 0, 0)
    assert tuple(await conn.fetchrow(CHILD_COUNTS, "new")) == (1, 1, 1, 0, 1, 1)  # its edge to p went with p
