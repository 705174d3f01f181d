"""The completed jobs' partitions (sql/041): made ahead of time, and dropped whole once their
retention has passed.

`jobs_completed` is partitioned by `retain_from`, the moment a job's retention starts (when it
completed). Its partitions cover contiguous ranges of time, the oldest from MINVALUE, and the last
one, `jobs_completed_later`, from the last bound to MAXVALUE, so that a completion always has a
partition to go to even when no worker has made one ahead for a long while.

- `make_ahead` keeps partitions of `width` seconds ready ahead of now, in one statement
  (jobdesk_make_partitions_ahead, sql/041): it detaches `jobs_completed_later` (a moment's lock
  of `jobs_completed`, which claims and inserts never take: they touch jobs_live only), makes the
  new ranges, moves any rows that had landed in `later` into them, and attaches `later` again
  after them.
- `drop_due` drops the partitions whose every job is past its retention. The few jobs that must
  stay longer (a pipeline or a dependant still needs them) move to the current partition first.
  `DETACH ... CONCURRENTLY` takes only a SHARE UPDATE EXCLUSIVE lock, so nothing that reads or
  writes jobs waits for it; then the rows of other tables that belonged to its jobs go, and the
  table is dropped: no row of `jobs` is deleted, no dead tuple left for vacuum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg

LATER = "jobs_completed_later"
MIN_WIDTH_S = 60.0
MAX_WIDTH_S = 7 * 86400.0
FOREVER_WIDTH_S = 30 * 86400.0  # when completed jobs are kept forever: a partition a month
LOCK_TIMEOUT_MS = 200  # how long making partitions may wait for its moment's lock; then next time
# The tables that keep rows per job, by the column that names the job, are those the trigger that
# follows a DELETE of jobs cleans (jobdesk_jobs_forget_children, which each migration that adds one
# extends): read from its definition, so that a dropped partition's jobs lose the same rows.
_CHILD_DELETE = re.compile(r"DELETE FROM\s+(\w+)\s+WHERE\s+(\w+)\s*=\s*ANY\s*\(ids\)", re.IGNORECASE)


@dataclass(frozen=True)
class Partition:
    """One partition of `jobs_completed`: its rows have lower <= retain_from < upper (None: no bound)."""

    name: str
    lower: datetime | None
    upper: datetime | None
    detaching: bool = False


@dataclass(frozen=True)
class Dropped:
    """A partition dropped (or, in a dry run, that would be): its name, range and about how many
    completed jobs went with it (PostgreSQL's count of its live rows), and how many stayed."""

    name: str
    lower: datetime | None
    upper: datetime | None
    jobs: int
    kept: int = 0


def width_for(retention_s: float | None) -> float:
    """The width of a new partition for a completed-job retention: a quarter of it, within a
    minute and a week, so that a partition goes at most a quarter of the retention after its last
    job's time has come, and there are a handful of them (planning a read of `jobs` by id looks
    at each). A month when completed jobs are kept forever."""
    if retention_s is None:
        return FOREVER_WIDTH_S
    return min(MAX_WIDTH_S, max(MIN_WIDTH_S, retention_s / 4))


async def partitions(conn: asyncpg.Connection) -> list[Partition]:
    """The partitions of `jobs_completed`, oldest first."""
    rows = await conn.fetch("SELECT name, lower, upper, detaching FROM jobdesk_completed_partitions()")
    return [Partition(r["name"], r["lower"], r["upper"], r["detaching"]) for r in rows]


async def make_ahead(conn: asyncpg.Connection, width: float, ahead_s: float) -> list[str]:
    """Make sure partitions reach at least `ahead_s` seconds from now; when they fall short, make
    them for twice that, `width` seconds each, in one statement (jobdesk_make_partitions_ahead,
    sql/041). Returns the names of those made: none when they reach far enough already, when
    another worker is making them, or when the moment's lock of `jobs_completed` is not had
    within LOCK_TIMEOUT_MS (the next round tries again)."""
    now = datetime.now(UTC)
    later = next((p for p in await partitions(conn) if p.name == LATER), None)
    if later is None or later.lower is None or later.lower >= now + timedelta(seconds=ahead_s):
        return []
    try:
        made = await conn.fetchval("SELECT jobdesk_make_partitions_ahead($1, $2, $3)", width,
                                   now + timedelta(seconds=2 * ahead_s), LOCK_TIMEOUT_MS)
    except asyncpg.LockNotAvailableError:
        return []
    return list(made)


# Completed jobs a pipeline or a dependant still needs (as the row-by-row pruner kept them):
# those of a pipeline with a job unfinished (or failed within its retention, $1 seconds; NULL
# forever), and the parents of such jobs. Found from the unfinished side, which is small, and
# then looked up in the partition by its indexes, never by reading it through.
_NEEDED = """
WITH unfinished AS (  -- each part names its statuses, so that only their partitions are read
    SELECT id, pipeline_id FROM jobs WHERE status IN ('queued', 'in_progress', 'waiting_approval')
    UNION ALL
    SELECT id, pipeline_id FROM jobs
     WHERE status = 'failed' AND ($1::float8 IS NULL OR updated_at >= now() - make_interval(secs => $1))
)
SELECT ARRAY(SELECT DISTINCT pipeline_id FROM unfinished WHERE pipeline_id IS NOT NULL) AS pipelines,
       ARRAY(SELECT DISTINCT d.depends_on_id FROM job_dependencies d JOIN unfinished u ON u.id = d.job_id) AS parents
"""
_KEEPERS = """
SELECT id FROM {part} WHERE pipeline_id = ANY($1::text[])
UNION
SELECT id FROM {part} WHERE id = ANY($2::text[])
"""

_MOVE_KEEPERS = """
UPDATE jobs SET retain_from = now()
 WHERE status = 'completed' AND id = ANY($1::text[]) AND retain_from >= $2 AND retain_from < $3
"""


def _due(parts: list[Partition], older_than_s: float) -> list[Partition]:
    """The partitions whose every row's retention started more than `older_than_s` ago, never
    `later` nor the newest bounded one (where completions go now)."""
    cutoff = datetime.now(UTC) - timedelta(seconds=older_than_s)
    return [p for p in parts if p.name != LATER and p.upper is not None and p.upper <= cutoff]


EXACT_BELOW = 1_000_000  # rows: a partition smaller than this is counted, a larger one estimated


async def _live_rows(conn: asyncpg.Connection, name: str) -> int:
    """How many jobs a partition holds: counted when it is small, else PostgreSQL's count of its
    live rows (its statistics, exact but for the last second's changes): counting ten million
    rows would take longer than dropping them."""
    estimate = int(await conn.fetchval("SELECT pg_stat_get_live_tuples($1::regclass)", name) or 0)
    if estimate >= EXACT_BELOW:
        return estimate
    return int(await conn.fetchval(f'SELECT count(*) FROM "{name}"'))


# Partitions detached by a pruner that stopped before dropping them: no longer jobs, still tables.
_DETACHED = r"""
SELECT c.relname::text FROM pg_class c
 WHERE c.relname LIKE 'jobs\_completed\_%' AND c.relkind = 'r' AND NOT c.relispartition
   AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = 'jobs'::regclass)
"""


async def drop_due(pool: asyncpg.Pool, older_than_s: float, failed_retention: float | None, *,
                   dry_run: bool = False) -> list[Dropped]:
    """Drop the partitions of completed jobs past `older_than_s`, oldest first, each after
    moving out the jobs that must stay; in a dry run, say what would go and change nothing."""
    async with pool.acquire() as conn:
        due = _due(await partitions(conn), older_than_s)
        if not dry_run:
            for name in [r[0] for r in await conn.fetch(_DETACHED)]:
                await _drop_detached(conn, name)
    out = []
    for part in due:
        async with pool.acquire() as conn:
            needed = await conn.fetchrow(_NEEDED, failed_retention)
            keepers = [r["id"] for r in await conn.fetch(_KEEPERS.format(part=f'"{part.name}"'),
                                                        needed["pipelines"], needed["parents"])]
            jobs = await _live_rows(conn, part.name)
            if dry_run:
                out.append(Dropped(part.name, part.lower, part.upper, max(jobs - len(keepers), 0), len(keepers)))
                continue
            if keepers:
                await conn.execute(_MOVE_KEEPERS, keepers, part.lower or datetime.min.replace(tzinfo=UTC),
                                   part.upper)
            await _detach_and_drop(conn, part)
        out.append(Dropped(part.name, part.lower, part.upper, max(jobs - len(keepers), 0), len(keepers)))
    return out


async def _detach_and_drop(conn: asyncpg.Connection, part: Partition) -> None:
    """Detach without blocking anyone (FINALIZE one whose concurrent detach was interrupted), then
    delete what other tables keep for its jobs, then drop it."""
    if part.detaching:
        await conn.execute(f'ALTER TABLE jobs_completed DETACH PARTITION "{part.name}" FINALIZE')
    else:
        await conn.execute(f'ALTER TABLE jobs_completed DETACH PARTITION "{part.name}" CONCURRENTLY')
    await _drop_detached(conn, part.name)


async def child_tables(conn: asyncpg.Connection) -> list[tuple[str, str]]:
    """(table, column) of each table that keeps rows per job (see _CHILD_DELETE)."""
    source = await conn.fetchval("SELECT pg_get_functiondef('jobdesk_jobs_forget_children'::regproc)")
    return _CHILD_DELETE.findall(source)


async def _drop_detached(conn: asyncpg.Connection, name: str) -> None:
    """The rows other tables keep for a detached partition's jobs, then the partition."""
    children = await child_tables(conn)
    async with conn.transaction():
        # Driven by the other table's rows, each looked up in the partition by its key: a hash
        # of ten million ids, or a read of them all, would cost more than the drop.
        await conn.execute("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")
        for table, column in children:
            await conn.execute(f'DELETE FROM {table} c USING "{name}" p WHERE c.{column} = p.id')
        await conn.execute(f'DROP TABLE "{name}"')
