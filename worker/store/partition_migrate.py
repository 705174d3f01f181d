"""Migration 041 on a large `jobs`, made ahead while the workers run (`jobdesk migrate`).

sql/041 makes `jobs` a partitioned table. Run whole, it copies every row while it holds `jobs`
in ACCESS EXCLUSIVE mode: on ten million jobs, minutes without a claim. On a table that holds
more than THRESHOLD_ROWS jobs, `jobdesk migrate` does the long part first, outside that lock:

1. step 1 of sql/041 alone (the text before its MARKER line): `jobs_partitioned` beside `jobs`,
   empty, with its partitions and indexes;
2. the trigger `jobs_mirror` on the old `jobs` (function jobdesk_jobs_mirror), which from then on
   repeats every insert, update and delete in `jobs_partitioned`;
3. a backfill of the rows that were there before, a batch at a time in `id` order, each batch in
   its own transaction: the batch's rows are held FOR SHARE (a claim skips them, an update of one
   waits for the batch) and those not copied yet are copied; the table's comment says how far it
   went, so that a run interrupted resumes there;
4. VACUUM (ANALYZE) of the copy; a check that, in one snapshot, the old table and the copy hold
   as many jobs of each status; then the comment COPIED, which tells sql/041 to trust the copy;
5. the normal migration run, with a short lock_timeout: sql/041 then only drops the mirror and
   swaps the names under its lock. When the lock does not come in time, the transaction rolls back
   whole and is tried again after a pause.

Interrupted anywhere, nothing is lost: the mirror stays and keeps the copy in step; the next
`jobdesk migrate` resumes, and a plain migration run copies the rows still missing itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import asyncpg

from jobdesk.core.errors import JobdeskError
from jobdesk.store.migrations import LOCK_KEY, Migration, applied_versions, available_migrations, migrate

VERSION = 41  # sql/041_partitioned_jobs.sql
THRESHOLD_ROWS = 50_000  # below it, sql/041's copy in its own transaction is fast enough
BATCH_ROWS = 5_000  # an update of a job in the batch waits for its copy (some 50 ms)
MARKER = "-- 2. The rows, and the swap."  # where step 1 of sql/041 ends
COPIED = "jobdesk: every row copied"  # the comment sql/041 trusts
RESUME = "jobdesk: copied up to "  # the comment while the backfill runs, with the last id
LOCK_TIMEOUT_MS = 300  # how long the trigger's creation and the swap may wait for `jobs` (claims wait behind)
TRIES = 8
PAUSE_S = 2.0  # between two tries

Progress = Callable[["Copied"], None]

MIRROR_SQL = """
CREATE OR REPLACE FUNCTION jobdesk_jobs_mirror() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM jobs_partitioned WHERE id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO jobs_partitioned OVERRIDING SYSTEM VALUE SELECT NEW.*, NEW.updated_at;
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER jobs_mirror AFTER INSERT OR UPDATE OR DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobdesk_jobs_mirror();
"""

BATCH_IDS_SQL = "SELECT id FROM jobs WHERE id > $1::varchar ORDER BY id LIMIT $2 FOR SHARE"
BATCH_COPY_SQL = """
INSERT INTO jobs_partitioned OVERRIDING SYSTEM VALUE
SELECT j.*, j.updated_at FROM jobs j
 WHERE j.id = ANY ($1::varchar[]) AND NOT EXISTS (SELECT 1 FROM jobs_partitioned p WHERE p.id = j.id)
"""
COUNTS_SQL = "SELECT status, count(*) FROM {table} GROUP BY status"


class CopyMismatch(JobdeskError):
    """The copy made ahead does not hold the same jobs as `jobs`: the swap is not made."""


class SwapTimedOut(JobdeskError):
    """`jobs` stayed locked by others at every try: the migration is not applied yet."""


@dataclass
class Copied:
    """How far the backfill is: rows looked at, rows copied by it, seconds since it started."""

    scanned: int = 0
    copied: int = 0
    batches: int = 0
    seconds: float = 0.0
    finished: bool = False  # the last call: every row looked at
    estimate: int = 0  # about how many rows `jobs` holds

    @property
    def rate(self) -> float:
        return self.scanned / self.seconds if self.seconds > 0 else 0.0


@dataclass
class CopyReport:
    """What a migration made ahead did, for `jobdesk migrate` to print."""

    copied_ahead: int = 0  # rows the backfill copied (the mirror copied the rest)
    scanned: int = 0
    resumed_from: str | None = None  # the id after which an earlier run had stopped
    copy_seconds: float = 0.0
    vacuum_seconds: float = 0.0
    swap_seconds: float = 0.0  # sql/041's statements, from its lock's request to its COMMIT
    commit_seconds: float = 0.0  # that COMMIT (the old table's files are removed then)
    swap_tries: int = 0
    trigger_tries: int = 0
    counts_before: dict[str, int] = field(default_factory=dict)  # the old `jobs`, by status
    counts_after: dict[str, int] = field(default_factory=dict)  # the copy, in the same snapshot

    def as_json(self) -> dict[str, object]:
        return asdict(self)


async def wants_copy_ahead(conn: asyncpg.Connection, folder: Path | None = None,
                           threshold: int = THRESHOLD_ROWS) -> bool:
    """Whether sql/041 is pending on a `jobs` not partitioned yet that is large (or whose copy
    ahead has already started)."""
    if not any(m.version == VERSION for m in available_migrations(folder)):
        return False
    if VERSION in await applied_versions(conn):
        return False
    kind = await conn.fetchval("SELECT relkind::text FROM pg_class WHERE oid = to_regclass('jobs')")
    if kind != "r":
        return False
    if await conn.fetchval("SELECT to_regprocedure('jobdesk_jobs_mirror()') IS NOT NULL"):
        return True
    rows = await conn.fetchval("SELECT count(*) FROM (SELECT 1 FROM jobs LIMIT $1) j", threshold + 1)
    return bool(rows > threshold)


def step_one(folder: Path | None = None) -> str:
    """The text of sql/041 before its MARKER line: the partitioned table, made beside `jobs`."""
    found = [m for m in available_migrations(folder) if m.version == VERSION]
    if not found:
        raise JobdeskError(f"migration {VERSION:03d} is missing")
    text = found[0].path.read_text(encoding="utf-8")
    head, marker, _ = text.partition("\n" + MARKER)
    if not marker:
        raise JobdeskError(f"{found[0].path.name} has no line {MARKER!r}: it cannot be made ahead")
    return head


HOLDERS_SQL = """
SELECT DISTINCT a.pid, a.backend_type, a.state, left(a.query, 80) AS query
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_class c ON c.oid = l.relation
 WHERE l.granted AND a.pid <> pg_backend_pid() AND c.relname LIKE 'jobs%' AND a.datname = current_database()
 ORDER BY a.pid
"""
AUTOVACUUM_SQL = """
SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_class c ON c.oid = l.relation
                WHERE a.backend_type = 'autovacuum worker' AND l.granted AND c.relname LIKE 'jobs%')
"""
AUTOVACUUM_WAIT_S = 600.0


async def _retry_locked(conn: asyncpg.Connection, action: Callable[[], Awaitable[None]], what: str) -> int:
    """Run `action`, whose transaction waits at most LOCK_TIMEOUT_MS for its locks, again after a
    pause while they do not come; return the number of tries. An autovacuum of `jobs` or of its
    copy is waited for without counting a try: it gives way only to a lock that waits longer than
    deadlock_timeout (1 s by default), which claims must not."""
    attempt = 0
    while True:
        attempt += 1
        try:
            await action()
            return attempt
        except asyncpg.LockNotAvailableError:
            if attempt == TRIES:
                holders = "; ".join(f"pid {r['pid']} ({r['backend_type']}, {r['state']}): {r['query']}"
                                    for r in await conn.fetch(HOLDERS_SQL))
                raise SwapTimedOut(f"{what}: `jobs` stayed locked by other sessions at {TRIES} tries of "
                                   f"{LOCK_TIMEOUT_MS} ms ({holders or 'none left now'}); run `jobdesk migrate` "
                                   "again") from None
            if await _wait_for_autovacuum(conn):
                attempt -= 1
            else:
                await asyncio.sleep(PAUSE_S)


async def _wait_for_autovacuum(conn: asyncpg.Connection) -> bool:
    """Whether an autovacuum of `jobs` or of its copy was running; if so, once it has ended."""
    if not await conn.fetchval(AUTOVACUUM_SQL):
        return False
    deadline = time.monotonic() + AUTOVACUUM_WAIT_S
    while time.monotonic() < deadline and await conn.fetchval(AUTOVACUUM_SQL):
        await asyncio.sleep(0.5)
    return True


async def settle(conn: asyncpg.Connection, report: CopyReport) -> None:
    """VACUUM and ANALYZE the copy: the planner has its figures from the swap on, and no
    autovacuum of the rows just copied stands in the swap's way."""
    started = time.monotonic()
    await conn.execute("VACUUM (ANALYZE) jobs_partitioned")
    report.vacuum_seconds = time.monotonic() - started


async def prepare(conn: asyncpg.Connection, folder: Path | None = None) -> int:
    """Make `jobs_partitioned` (step 1 of sql/041, a no-op when it exists) and the mirror on
    `jobs`; return the tries the trigger took (its creation waits for the writers of the moment,
    and new writers wait for it)."""
    await conn.execute(step_one(folder))

    async def mirror() -> None:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
            await conn.execute(MIRROR_SQL)

    return await _retry_locked(conn, mirror, "making the mirror trigger")


async def _comment(conn: asyncpg.Connection) -> str | None:
    value = await conn.fetchval("SELECT obj_description('jobs_partitioned'::regclass, 'pg_class')")
    return str(value) if value is not None else None


async def backfill(conn: asyncpg.Connection, report: CopyReport, progress: Progress | None = None,
                   batch: int = BATCH_ROWS) -> None:
    """Copy the rows of `jobs` that the copy lacks, in `id` order from where an earlier run
    stopped; each batch commits with the comment that says how far it went."""
    comment = await _comment(conn)
    if comment == COPIED:
        return
    last = comment[len(RESUME):] if comment and comment.startswith(RESUME) else ""
    report.resumed_from = last or None
    state = Copied(estimate=int(await conn.fetchval(
        "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'jobs'::regclass")))
    started = time.monotonic()
    while True:
        async with conn.transaction():
            # Batches of two runs at once take turns, as migrations do: each sees what the other copied.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
            ids = [r["id"] for r in await conn.fetch(BATCH_IDS_SQL, last, batch)]
            if not ids:
                break
            done = await conn.execute(BATCH_COPY_SQL, ids)
            last = ids[-1]
            await conn.execute(f"COMMENT ON TABLE jobs_partitioned IS {_literal(RESUME + last)}")
        state.batches += 1
        state.scanned += len(ids)
        state.copied += int(done.split()[-1])
        state.seconds = time.monotonic() - started
        if progress is not None:
            progress(state)
    state.finished = True
    if progress is not None:
        progress(state)
    report.scanned, report.copied_ahead = state.scanned, state.copied
    report.copy_seconds = time.monotonic() - started


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


async def check_counts(conn: asyncpg.Connection, report: CopyReport) -> None:
    """Count the jobs of each status in the old table and in the copy, in one snapshot (the
    mirror changes both in the same transaction); raise CopyMismatch when they differ."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        before = {r[0]: r[1] for r in await conn.fetch(COUNTS_SQL.format(table="jobs"))}
        after = {r[0]: r[1] for r in await conn.fetch(COUNTS_SQL.format(table="jobs_partitioned"))}
    report.counts_before, report.counts_after = dict(sorted(before.items())), dict(sorted(after.items()))
    if before != after:
        await conn.execute("COMMENT ON TABLE jobs_partitioned IS NULL")  # the next run looks at every row
        raise CopyMismatch(f"the copy of jobs made ahead differs from jobs: {report.counts_before} against "
                           f"{report.counts_after}; the swap "
                           "was not made. To start the copy over: DROP TABLE jobs_partitioned; "
                           "DROP FUNCTION jobdesk_jobs_mirror() CASCADE; then `jobdesk migrate` again")


async def swap(conn: asyncpg.Connection, report: CopyReport, folder: Path | None = None) -> list[Migration]:
    """Mark the copy complete and apply the pending migrations (041 swaps the tables), with a
    short lock_timeout, trying again while `jobs` is busy."""
    await conn.execute(f"COMMENT ON TABLE jobs_partitioned IS {_literal(COPIED)}")
    applied: list[Migration] = []

    async def run() -> None:
        timings: dict[int, tuple[float, float]] = {}
        applied.extend(await migrate(conn, folder, timings=timings, lock_timeout_ms=LOCK_TIMEOUT_MS))
        if VERSION in timings:
            report.swap_seconds, report.commit_seconds = timings[VERSION]

    report.swap_tries = await _retry_locked(conn, run, "the swap of jobs")
    return applied


async def migrate_ahead(conn: asyncpg.Connection, folder: Path | None = None, progress: Progress | None = None,
                        batch: int = BATCH_ROWS) -> tuple[list[Migration], CopyReport]:
    """The whole of it: earlier migrations, the copy made ahead, the check, and the swap with the
    migrations after it. Call when wants_copy_ahead() says so."""
    applied = await migrate(conn, folder, below=VERSION)  # those before 041 still pending
    report = CopyReport()
    report.trigger_tries = await prepare(conn, folder)
    await backfill(conn, report, progress, batch)
    await settle(conn, report)
    await check_counts(conn, report)
    applied += await swap(conn, report, folder)
    return applied, report

