"""`jobdesk migrate` on a large unpartitioned `jobs` (a database at migration 040): the copy made
ahead of migration 041 while clients claim, complete and enqueue jobs, and its resumption after an
interruption. The clients speak plain SQL, as the workers of the release before 041 did."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.paths import sql_dir
from jobdesk.store import partition_migrate as pm
from jobdesk.store.db import connect
from jobdesk.store.migrations import applied_versions, migrate
from tests import pg
from tests.helpers import run_cli

SEED = 60_000
# The migrations after 041, which a database at 040 gets with it.
LATER_NAMES = sorted(p.stem for p in sql_dir().glob("0*.sql") if int(p.name[:3]) > pm.VERSION)
LATER = [int(name[:3]) for name in LATER_NAMES]

# Every status, ids in no particular order (UUIDv7 from the default and random text ones), inputs
# that the GIN index holds, unique keys on live jobs, errors on failed ones.
SEED_SQL = """
INSERT INTO jobs (id, type, status, input_data, error_message, unique_key, priority, is_active,
                  updated_at, completed_at, worker_id, started_at, attempts)
SELECT CASE WHEN g % 2 = 0 THEN md5(g::text) ELSE jobdesk_uuid7() END, 'seed',
       (ARRAY['queued', 'in_progress', 'completed', 'completed', 'failed', 'cancelled', 'waiting_approval'])[1 + g % 7],
       CASE WHEN g % 3 = 0 THEN jsonb_build_object('n', g) ELSE '{}' END,
       CASE WHEN g % 7 = 4 THEN 'boom ' || g END,
       CASE WHEN g % 7 IN (0, 1) AND g % 5 = 0 THEN 'key-' || g END,
       g % 4, g % 7 <> 5, now() - g * interval '1 minute',
       CASE WHEN g % 7 IN (2, 3) THEN now() - g * interval '1 minute' END,
       CASE WHEN g % 7 = 1 THEN 'old-worker' END, CASE WHEN g % 7 = 1 THEN now() END, (g % 7 > 0)::int
  FROM generate_series(1, $1) g
"""
# Dependants of completed and of queued seed jobs (their edges and pending_deps made by 040's trigger).
DEPENDANTS_SQL = """
INSERT INTO jobs (type, input_data, dependent_on_jobs)
SELECT 'seed', '{}', jsonb_build_array(a.id, b.id)
  FROM (SELECT id, row_number() OVER (ORDER BY id) n FROM jobs WHERE status = 'completed' LIMIT 500) a
  JOIN (SELECT id, row_number() OVER (ORDER BY id) n FROM jobs WHERE status = 'queued' LIMIT 500) b USING (n)
"""
ATTEMPTS_SQL = """
INSERT INTO job_attempts (job_id, attempt, worker_id, outcome, error_message, job_type)
SELECT id, 1, 'old-worker', 'failed', error_message, type FROM jobs WHERE status = 'failed'
"""
WORK_SQL = "INSERT INTO jobs (id, type, input_data) SELECT 'work-' || g, 'work', '{}' FROM generate_series(1, $1) g"
CLAIM_SQL = """
UPDATE jobs SET status = 'in_progress', worker_id = 'sql-worker', started_at = now(), attempts = attempts + 1,
                updated_at = now()
 WHERE id = (SELECT id FROM jobs WHERE type = 'work' AND status = 'queued' AND pending_deps = 0 AND is_active
                AND run_at IS NULL ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id
"""
COMPLETE_SQL = "UPDATE jobs SET status = 'completed', completed_at = now(), updated_at = now() WHERE id = $1"
# Every column of the jobs of a type but retain_from (which only the partitioned table has).
CHECKSUM_SQL = """
SELECT count(*), md5(string_agg((to_jsonb(j) - 'retain_from')::text, ',' ORDER BY j.id))
  FROM jobs j WHERE type = $1
"""
SIDE_SQL = """
SELECT (SELECT md5(string_agg(d::text, ',' ORDER BY d.job_id, d.depends_on_id)) FROM job_dependencies d),
       (SELECT md5(string_agg(a::text, ',' ORDER BY a.id)) FROM job_attempts a)
"""


@pytest.fixture
async def old_dsn(template: str, tmp_path: Path) -> AsyncIterator[str]:
    """A database at migration 040, the last before `jobs` was partitioned."""
    folder = tmp_path / "sql"
    folder.mkdir()
    for path in sql_dir().glob("0*.sql"):
        if int(path.name[:3]) < pm.VERSION:
            shutil.copy(path, folder)
    url = await pg.create_empty_database(template)
    conn = await connect(url)
    try:
        await migrate(conn, folder)
    finally:
        await conn.close()
    yield url
    await pg.drop_test_database(url)


async def seed(conn: asyncpg.Connection, work: int) -> None:
    await conn.execute(SEED_SQL, SEED)
    await conn.execute(DEPENDANTS_SQL)
    await conn.execute(ATTEMPTS_SQL)
    await conn.execute(WORK_SQL, work)
    await conn.execute("ANALYZE jobs")


async def sql_worker(dsn: str, stop: asyncio.Event, done: list[str]) -> None:
    """Claims and completes `work` jobs one at a time until told to stop."""
    conn = await connect(dsn)
    try:
        while not stop.is_set():
            try:
                job = await conn.fetchval(CLAIM_SQL)
            except asyncpg.SerializationError:  # a row it read moved to another partition: read again
                continue
            if job is None:
                await asyncio.sleep(0.01)
                continue
            await conn.execute(COMPLETE_SQL, job)
            done.append(job)
    finally:
        await conn.close()


async def enqueuer(dsn: str, stop: asyncio.Event, made: list[str]) -> None:
    """Inserts a `work` job every few milliseconds until told to stop."""
    conn = await connect(dsn)
    try:
        while not stop.is_set():
            job = f"late-{len(made)}"
            await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'work', '{}')", job)
            made.append(job)
            await asyncio.sleep(0.003)
    finally:
        await conn.close()


async def wait_for(conn: asyncpg.Connection, sql: str, *args: object, tries: int = 600) -> None:
    for _ in range(tries):
        if await conn.fetchval(sql, *args):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never true: {sql}")


async def test_made_ahead_while_jobs_are_claimed_completed_and_enqueued(old_dsn: str) -> None:
    conn = await connect(old_dsn)
    try:
        await seed(conn, work=1_000)
        seed_sum = await conn.fetchrow(CHECKSUM_SQL, "seed")
        side_sum = await conn.fetchrow(SIDE_SQL)
        assert await pm.wants_copy_ahead(conn)

        stop = asyncio.Event()
        done: list[str] = []
        made: list[str] = []
        clients = [asyncio.create_task(sql_worker(old_dsn, stop, done)),
                   asyncio.create_task(enqueuer(old_dsn, stop, made))]
        await wait_for(conn, "SELECT count(*) > 50 FROM jobs WHERE type = 'work' AND status = 'completed'")
        progress: list[pm.Copied] = []
        applied, report = await pm.migrate_ahead(conn, progress=progress.append, batch=2_000)
        during = len(done), len(made)
        await wait_for(conn, "SELECT count(*) >= 20 FROM jobs WHERE id LIKE 'late-%' AND status = 'completed'"
                             " AND retain_from > $1", await conn.fetchval("SELECT now()"))
        stop.set()
        await asyncio.gather(*clients)
        assert len(done) > during[0] and len(made) > during[1]  # both went on after the swap

        assert [m.version for m in applied] == [pm.VERSION, *LATER]
        assert pm.VERSION in await applied_versions(conn)
        assert await conn.fetchval("SELECT relkind::text FROM pg_class WHERE oid = 'jobs'::regclass") == "p"
        assert await conn.fetchval("SELECT to_regprocedure('jobdesk_jobs_mirror()')") is None
        assert await conn.fetchval("SELECT obj_description('jobs'::regclass, 'pg_class')") is None
        assert report.counts_before == report.counts_after and sum(report.counts_before.values()) > SEED
        assert report.scanned >= SEED and 0 < report.copied_ahead <= report.scanned
        assert progress[-1].finished and progress[-1].scanned == report.scanned
        assert report.swap_tries >= 1 and report.swap_seconds > 0

        # Every job once, the seed jobs unchanged in every column, every job made during it there.
        assert await conn.fetchval("SELECT count(*) = count(DISTINCT id) FROM jobs")
        assert await conn.fetchrow(CHECKSUM_SQL, "seed") == seed_sum
        assert await conn.fetchrow(SIDE_SQL) == side_sum
        work = {r["id"]: r["status"] for r in await conn.fetch("SELECT id, status FROM jobs WHERE type = 'work'")}
        assert len(work) == 1_000 + len(made) and set(made) <= set(work)
        assert all(work[j] == "completed" for j in done)
        assert await conn.fetchval("SELECT count(*) FROM jobs_completed WHERE id = ANY ($1::varchar[])", done) \
            == len(set(done))
        # New work still runs through the partitioned table with the engine's own triggers.
        child = await conn.fetchrow("INSERT INTO jobs (type, input_data, dependent_on_jobs) VALUES ('seed', '{}', $1)"
                                    " RETURNING id, pending_deps", [done[0], made[-1]])
        assert child["pending_deps"] == (work[made[-1]] != "completed")
        assert await conn.fetchval("SELECT count(*) FROM job_dependencies WHERE job_id = $1", child["id"]) == 2
    finally:
        await conn.close()


async def interrupt_after(conn: asyncpg.Connection, batches: int) -> None:
    """A copy ahead stopped after a few batches, as by Ctrl-C."""
    seen: list[pm.Copied] = []

    def progress(state: pm.Copied) -> None:
        seen.append(state)
        if len(seen) == batches:
            raise KeyboardInterrupt

    await pm.prepare(conn)
    with pytest.raises(KeyboardInterrupt):
        await pm.backfill(conn, pm.CopyReport(), progress, batch=5_000)


async def change_some(conn: asyncpg.Connection) -> None:
    """Changes while no copy runs: the mirror keeps the copy in step, copied rows or not."""
    await conn.execute("UPDATE jobs SET status = 'cancelled', is_active = false WHERE type = 'work' AND "
                       "id IN (SELECT id FROM jobs WHERE type = 'work' ORDER BY id LIMIT 300)")
    await conn.execute("UPDATE jobs SET priority = priority + 1 WHERE type = 'seed' AND status = 'queued'")
    await conn.execute("DELETE FROM jobs WHERE type = 'seed' AND status = 'cancelled' AND md5(id) < '4'")
    await conn.execute(WORK_SQL.replace("'work-'", "'more-'"), 500)


async def test_an_interrupted_copy_resumes_where_it_stopped(old_dsn: str) -> None:
    conn = await connect(old_dsn)
    try:
        await seed(conn, work=1_000)
        await interrupt_after(conn, batches=3)
        comment = await conn.fetchval("SELECT obj_description('jobs_partitioned'::regclass, 'pg_class')")
        assert comment.startswith(pm.RESUME)
        await change_some(conn)
        sums = [await conn.fetchrow(CHECKSUM_SQL, t) for t in ("seed", "work")]
        total = await conn.fetchval("SELECT count(*) FROM jobs")
        assert await pm.wants_copy_ahead(conn)

        _, report = await pm.migrate_ahead(conn, batch=5_000)
        assert report.resumed_from is not None and report.scanned < total
        assert report.counts_before == report.counts_after
        assert await conn.fetchval("SELECT relkind::text FROM pg_class WHERE oid = 'jobs'::regclass") == "p"
        assert await conn.fetchval("SELECT count(*) = count(DISTINCT id) FROM jobs")
        assert await conn.fetchval("SELECT count(*) FROM jobs") == total
        assert [await conn.fetchrow(CHECKSUM_SQL, t) for t in ("seed", "work")] == sums
    finally:
        await conn.close()


async def test_a_plain_migration_after_an_interrupted_copy_copies_the_rest(old_dsn: str) -> None:
    conn = await connect(old_dsn)
    try:
        await seed(conn, work=1_000)
        await interrupt_after(conn, batches=2)
        await change_some(conn)
        sums = [await conn.fetchrow(CHECKSUM_SQL, t) for t in ("seed", "work")]
        total = await conn.fetchval("SELECT count(*) FROM jobs")

        assert [m.version for m in await migrate(conn)] == [pm.VERSION, *LATER]
        assert await conn.fetchval("SELECT count(*) = count(DISTINCT id) FROM jobs")
        assert await conn.fetchval("SELECT count(*) FROM jobs") == total
        assert [await conn.fetchrow(CHECKSUM_SQL, t) for t in ("seed", "work")] == sums
        assert await conn.fetchval("SELECT to_regprocedure('jobdesk_jobs_mirror()')") is None
    finally:
        await conn.close()


async def test_a_small_table_and_a_partitioned_one_need_no_copy_ahead(old_dsn: str, dsn: str) -> None:
    old = await connect(old_dsn)
    new = await connect(dsn)
    try:
        await old.execute(WORK_SQL, 1_000)
        assert not await pm.wants_copy_ahead(old)
        assert await pm.wants_copy_ahead(old, threshold=999)
        assert not await pm.wants_copy_ahead(new)  # migrated: 041 applied
    finally:
        await old.close()
        await new.close()


def test_step_one_is_the_text_before_the_marker(tmp_path: Path) -> None:
    head = pm.step_one()
    assert "CREATE TABLE jobs_partitioned" in head and "LOCK TABLE" not in head
    for path in sql_dir().glob("0*.sql"):
        text = path.read_text(encoding="utf-8")
        (tmp_path / path.name).write_text(text.replace(pm.MARKER, "-- 2.") if path.name.startswith("041") else text)
    with pytest.raises(Exception, match="cannot be made ahead"):
        pm.step_one(tmp_path)


async def test_jobdesk_migrate_says_what_it_copied_ahead(old_dsn: str) -> None:
    conn = await connect(old_dsn)
    try:
        await seed(conn, work=1_000)
        counts = {r[0]: r[1] for r in await conn.fetch("SELECT status, count(*) FROM jobs GROUP BY status")}
    finally:
        await conn.close()
    done = await asyncio.to_thread(run_cli, "migrate", "--json", dsn=old_dsn)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["applied"] == ["041_partitioned_jobs", *LATER_NAMES]
    copy = said["copied_ahead"]
    assert copy["counts_before"] == copy["counts_after"] == counts
    assert copy["copied_ahead"] == copy["scanned"] == sum(counts.values()) and copy["resumed_from"] is None
    assert copy["swap_tries"] == 1 and copy["swap_seconds"] > 0 and copy["commit_seconds"] > 0
    assert copy["copy_seconds"] > 0 and copy["vacuum_seconds"] > 0
    assert "copying jobs ahead: 61,500 of about" in done.stderr  # progress, on stderr with --json


async def test_jobdesk_migrate_resumes_an_interrupted_copy_and_prints_it(old_dsn: str) -> None:
    conn = await connect(old_dsn)
    try:
        await seed(conn, work=1_000)
        await interrupt_after(conn, batches=2)
    finally:
        await conn.close()
    done = await asyncio.to_thread(run_cli, "migrate", dsn=old_dsn)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"copied 51,500 jobs ahead into the partitioned table in [\d.]+ s \(resumed after id "
                        r"\S+\), and vacuumed them in [\d.]+ s; the workers went on meanwhile", lines[-4]), lines
    assert re.fullmatch(r"the swap held jobs for \d+ ms until its commit \(1 try\); the commit took \d+ ms",
                        lines[-3]), lines
    assert lines[-2].startswith("jobs by status, before | after: cancelled 8,571 | 8,571, completed ")
    assert lines[-1].startswith(f"applied {1 + len(LATER)} migration(s) to ")
    assert lines[-1].endswith(": " + ", ".join(["041_partitioned_jobs", *LATER_NAMES]))


async def test_a_swap_that_cannot_lock_jobs_gives_up_and_a_later_run_only_swaps(
        old_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pm, "TRIES", 2)
    monkeypatch.setattr(pm, "PAUSE_S", 0.1)
    conn = await connect(old_dsn)
    holder = await connect(old_dsn)
    try:
        await seed(conn, work=1_000)
        sums = [await conn.fetchrow(CHECKSUM_SQL, t) for t in ("seed", "work")]
        reader = holder.transaction()
        await reader.start()
        await holder.execute("SELECT count(*) FROM jobs WHERE false")  # holds ACCESS SHARE until it ends
        with pytest.raises(pm.SwapTimedOut, match=r"at 2 tries of 300 ms \(pid \d+ \(client backend, idle in "
                                                  r"transaction\): SELECT count\(\*\) FROM jobs WHERE false\)"):
            await asyncio.wait_for(pm.migrate_ahead(conn, batch=20_000), 60)
        assert pm.VERSION not in await applied_versions(conn)
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('between', 'work', '{}')")  # mirrored
        await reader.rollback()

        _, report = await pm.migrate_ahead(conn)
        assert report.scanned == 0 and report.swap_tries == 1  # the copy was complete and kept in step
        assert await conn.fetchval("SELECT relkind::text FROM pg_class WHERE oid = 'jobs'::regclass") == "p"
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id = 'between'") == 1
        await conn.execute("DELETE FROM jobs WHERE id = 'between'")
        assert [await conn.fetchrow(CHECKSUM_SQL, t) for t in ("seed", "work")] == sums
    finally:
        await holder.close()
        await conn.close()


async def test_a_copy_that_lost_a_row_is_not_swapped_in(old_dsn: str) -> None:
    conn = await connect(old_dsn)
    try:
        await seed(conn, work=1_000)
        sums = [await conn.fetchrow(CHECKSUM_SQL, t) for t in ("seed", "work")]
        await pm.prepare(conn)
        await pm.backfill(conn, pm.CopyReport())
        await conn.execute("ALTER TABLE jobs DISABLE TRIGGER jobs_mirror")  # a change the mirror missed
        await conn.execute("DELETE FROM jobs_partitioned WHERE id = 'work-7'")
        await conn.execute("ALTER TABLE jobs ENABLE TRIGGER jobs_mirror")
        queued = await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued'")
        with pytest.raises(pm.CopyMismatch, match=rf"'queued': {queued}, .* against .*'queued': {queued - 1}, .*; "
                                                  "the swap was not made"):
            await pm.migrate_ahead(conn)
        assert await conn.fetchval("SELECT relkind::text FROM pg_class WHERE oid = 'jobs'::regclass") == "r"
        assert pm.VERSION not in await applied_versions(conn)

        await conn.execute("DROP TABLE jobs_partitioned; DROP FUNCTION jobdesk_jobs_mirror() CASCADE")
        _, report = await pm.migrate_ahead(conn)  # as the error says
        assert report.counts_before == report.counts_after
        assert [await conn.fetchrow(CHECKSUM_SQL, t) for t in ("seed", "work")] == sums
    finally:
        await conn.close()


async def test_an_update_of_a_row_being_copied_waits_for_its_batch(old_dsn: str) -> None:
    conn, other, watcher = await connect(old_dsn), await connect(old_dsn), await connect(old_dsn)
    try:
        await conn.execute(WORK_SQL, 100)
        await pm.prepare(conn)
        async with conn.transaction():
            ids = [r["id"] for r in await conn.fetch(pm.BATCH_IDS_SQL, "", 50)]
            pid = await other.fetchval("SELECT pg_backend_pid()")
            update = asyncio.create_task(other.execute(
                "UPDATE jobs SET status = 'cancelled', is_active = false WHERE id = $1", ids[0]))
            await wait_for(watcher, "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid)
            await conn.execute(pm.BATCH_COPY_SQL, ids)
        await update  # once the batch is in: the mirror then replaces the copied row
        rows = await conn.fetch("SELECT tableoid::regclass::text, status FROM jobs_partitioned WHERE id = $1", ids[0])
        assert [tuple(r) for r in rows] == [("jobs_failed_cancelled", "cancelled")]
        assert await conn.fetchval("SELECT count(*) FROM jobs_partitioned") == 50
    finally:
        for c in (conn, other, watcher):
            await c.close()
