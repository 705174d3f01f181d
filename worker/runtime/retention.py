"""Retention: finished jobs and old audit rows go once their time has passed.

The pruner runs inside the workers, in one worker at a time across the fleet: a row in
`jobdesk_leases` says who prunes and until when, and when the last run ended, so the fleet
prunes about once per JOB_PRUNE_INTERVAL. Completed jobs go a partition at a time
(jobdesk.store.partitions): a partition whose every job is past JOB_RETENTION_COMPLETED is
detached and dropped, which deletes no row. Failed and cancelled jobs, few and kept longer, are
deleted in batches, each its own short transaction under a statement timeout, so it never holds
many locks or a long snapshot. Claims touch only queued rows and the pruner only finished ones,
so a claim never waits for it. Every round, whether or not it prunes, the pruner also makes the
completed jobs' partitions ahead of time.

A job is kept while any job of its pipeline is unfinished (queued, in progress, waiting for
approval, or failed within its retention), and while any job that depends on it is unfinished:
a retry or an approval there still needs its results and edges. Deleting a completed parent
leaves its children as they are (their `pending_deps` no longer counts it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import asyncpg

from jobdesk.core.errors import JobdeskError
from jobdesk.store import partitions
from jobdesk.store.db import CONNECTION_ERRORS

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

log = logging.getLogger("jobdesk.retention")

LEASE = "pruner"
BATCH = 10_000  # rows per delete transaction, at most
BATCH_TIMEOUT_MS = 10_000  # statement timeout of each batch
# Share of the time a pruner working through a backlog spends deleting: after each full batch it
# rests three times as long as the batch took, so the jobs running beside it keep most of the
# machine. A run that finds less than a batch (the steady state) never rests.
PACE = 0.25
LEASE_TTL_S = 300.0  # a pruner that dies mid-run keeps others out at most this long
JOB_STATUSES = ("completed", "cancelled", "failed")
PRUNABLE = (*JOB_STATUSES, "audit", "events")  # what `jobdesk prune --status` accepts


class PruneBusy(JobdeskError):
    """Another pruner holds the lease."""


@dataclass
class PruneResult:
    """Rows deleted (or, in a dry run, that would be) per status, plus `audit` rows."""

    counts: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False
    seconds: float = 0.0
    busy_seconds: float = 0.0  # of `seconds`, the time spent in the delete statements
    dropped: list[partitions.Dropped] = field(default_factory=list)  # completed jobs' partitions

    def describe(self) -> str:
        parts = ", ".join(f"{'~' if what == 'completed' and self.dropped else ''}{n:,} {what}"
                          for what, n in self.counts.items())
        verb = "would prune" if self.dry_run else "pruned"
        rested = f" ({self.busy_seconds:.1f} s of it deleting)" if self.seconds - self.busy_seconds >= 1 else ""
        text = f"{verb} {parts or 'nothing'} in {self.seconds:.1f} s{rested}"
        if self.dropped:
            names = ", ".join(d.name for d in self.dropped)
            kept = sum(d.kept for d in self.dropped)
            moved = f"; {kept:,} completed jobs still needed moved to a newer partition" if kept else ""
            text += (f"; {'would drop' if self.dry_run else 'dropped'} {len(self.dropped)} "
                     f"partition{'s' if len(self.dropped) > 1 else ''} of completed jobs ({names}){moved}")
        return text

    def as_json(self) -> dict[str, object]:
        return {"counts": self.counts, "dry_run": self.dry_run, "seconds": round(self.seconds, 3),
                "dropped": [{"partition": d.name, "jobs": d.jobs, "kept": d.kept,
                             "from": d.lower.isoformat() if d.lower else None,
                             "to": d.upper.isoformat() if d.upper else None} for d in self.dropped]}


def cutoffs(settings: Settings) -> dict[str, float | None]:
    """Retention in seconds per status, for the audit log, and for the events durable jobs wait
    on, which are kept as long as completed jobs (None: forever)."""
    return {"completed": settings.JOB_RETENTION_COMPLETED, "cancelled": settings.JOB_RETENTION_CANCELLED,
            "failed": settings.JOB_RETENTION_FAILED, "audit": settings.JOB_RETENTION_AUDIT,
            "events": settings.JOB_RETENTION_COMPLETED}


# A job that still matters: its pipeline or a dependant may yet run, retry or be approved.
_UNFINISHED = """(u.status IN ('queued', 'in_progress', 'waiting_approval')
      OR (u.status = 'failed' AND ($3::float8 IS NULL OR u.updated_at >= now() - make_interval(secs => $3))))"""

# The deletable jobs of status $1 last changed more than $2 seconds ago, oldest first.
_VICTIMS = """
SELECT j.id FROM jobs j
 WHERE j.status = $1 AND j.updated_at < now() - make_interval(secs => $2)
   AND (j.pipeline_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM jobs u WHERE u.pipeline_id = j.pipeline_id AND """ + _UNFINISHED + """))
   AND (NOT j.has_dependants OR NOT EXISTS (
        SELECT 1 FROM job_dependencies d JOIN jobs u ON u.id = d.job_id
         WHERE d.depends_on_id = j.id AND """ + _UNFINISHED + """))
 ORDER BY j.updated_at
"""

_DELETE_JOBS = """
WITH victims AS (""" + _VICTIMS + """ LIMIT $4 FOR UPDATE OF j SKIP LOCKED)
DELETE FROM jobs WHERE id IN (SELECT id FROM victims)
"""

_COUNT_JOBS = "SELECT count(*) FROM (" + _VICTIMS + ") v"

_DELETE_AUDIT = """
DELETE FROM audit_log WHERE id IN (
    SELECT id FROM audit_log WHERE at < now() - make_interval(secs => $1) ORDER BY at LIMIT $2)
"""

_DELETE_EVENTS = """
DELETE FROM job_events WHERE id IN (
    SELECT id FROM job_events WHERE created_at < now() - make_interval(secs => $1) ORDER BY id LIMIT $2)
"""

_TAKE_LEASE = """
UPDATE jobdesk_leases SET holder = $2, expires_at = now() + make_interval(secs => $3)
 WHERE name = $1 AND (expires_at <= now() OR holder = $2)
   AND ($4::float8 IS NULL OR last_run_at IS NULL OR last_run_at <= now() - make_interval(secs => $4))
RETURNING true
"""

_RENEW_LEASE = """
UPDATE jobdesk_leases SET expires_at = now() + make_interval(secs => $3)
 WHERE name = $1 AND holder = $2 RETURNING true
"""

_END_LEASE = """
UPDATE jobdesk_leases SET expires_at = now(), last_run_at = now(), holder = NULL, last_result = $3::text::jsonb
 WHERE name = $1 AND holder = $2
"""


async def take_lease(conn: asyncpg.Connection, holder: str, *, every_s: float | None) -> bool:
    """Become the pruner, unless another holds the lease or (with `every_s`) the fleet pruned
    less than `every_s` seconds ago."""
    return bool(await conn.fetchval(_TAKE_LEASE, LEASE, holder, LEASE_TTL_S, every_s))


async def lease_holder(conn: asyncpg.Connection) -> str | None:
    return await conn.fetchval("SELECT holder FROM jobdesk_leases WHERE name = $1 AND expires_at > now()", LEASE)


async def _batch(conn: asyncpg.Connection, sql: str, *args: object) -> int:
    async with conn.transaction():
        await conn.execute(f"SET LOCAL statement_timeout = {BATCH_TIMEOUT_MS}")
        status = await conn.execute(sql, *args)
    return int(status.split()[-1])


async def _count(conn: asyncpg.Connection, what: str, keep: float, failed_retention: float | None) -> int:
    if what == "audit":
        return int(await conn.fetchval(
            "SELECT count(*) FROM audit_log WHERE at < now() - make_interval(secs => $1)", keep))
    if what == "events":
        return int(await conn.fetchval(
            "SELECT count(*) FROM job_events WHERE created_at < now() - make_interval(secs => $1)", keep))
    return int(await conn.fetchval(_COUNT_JOBS, what, keep, failed_retention))


async def _delete_rows(pool: asyncpg.Pool, holder: str, what: str, keep: float, failed_retention: float | None,
                       result: PruneResult, batch: int, pace: float) -> bool:
    """Delete `what` past `keep` seconds in batches, resting between full ones; False when the
    lease was lost (the run stops)."""
    while True:
        batch_started = time.monotonic()
        async with pool.acquire() as conn:
            if what == "audit":
                n = await _batch(conn, _DELETE_AUDIT, keep, batch)
            elif what == "events":
                n = await _batch(conn, _DELETE_EVENTS, keep, batch)
            else:
                n = await _batch(conn, _DELETE_JOBS, what, keep, failed_retention, batch)
            result.counts[what] += n
            took = time.monotonic() - batch_started
            result.busy_seconds += took
            if n < batch:
                return True
            if not await conn.fetchval(_RENEW_LEASE, LEASE, holder, LEASE_TTL_S):
                log.warning("the pruner lease was taken over; stopping this run")
                return False
        await asyncio.sleep(took * (1 - pace) / pace)


async def _drop_completed(pool: asyncpg.Pool, keep: float, failed_retention: float | None,
                          result: PruneResult) -> None:
    """Completed jobs go with their partitions (jobdesk.store.partitions)."""
    started = time.monotonic()
    dropped = await partitions.drop_due(pool, keep, failed_retention, dry_run=result.dry_run)
    result.dropped.extend(dropped)
    result.counts["completed"] = sum(d.jobs for d in dropped)
    result.busy_seconds += time.monotonic() - started


async def prune(pool: asyncpg.Pool, holder: str, retention: dict[str, float | None], *,
                failed_retention: float | None, dry_run: bool = False, every_s: float | None = None,
                batch: int = BATCH, pace: float = PACE) -> PruneResult | None:
    """One pruner run: for each status in `retention` (seconds, None: keep), remove what is
    older: completed jobs a partition at a time, the rest in batches. `failed_retention` decides
    which failed jobs still keep their pipeline.

    Returns None when another pruner holds the lease (or, with `every_s`, ran too recently). A
    dry run counts what would go, takes no lease and changes nothing. Through a backlog, deleting
    takes at most `pace` of the run's time (1: no rest between batches).
    """
    started = time.monotonic()
    result = PruneResult(dry_run=dry_run)
    if dry_run:
        for what, keep in retention.items():
            if keep is not None and what == "completed":
                await _drop_completed(pool, keep, failed_retention, result)
            elif keep is not None:
                async with pool.acquire() as conn:
                    result.counts[what] = await _count(conn, what, keep, failed_retention)
            else:
                result.counts[what] = 0
        result.seconds = time.monotonic() - started
        return result
    async with pool.acquire() as conn:
        if not await take_lease(conn, holder, every_s=every_s):
            return None
    try:
        for what, keep in retention.items():
            result.counts[what] = 0
            if keep is None:
                continue
            if what == "completed":
                await _drop_completed(pool, keep, failed_retention, result)
            elif not await _delete_rows(pool, holder, what, keep, failed_retention, result, batch, pace):
                return result
    finally:
        result.seconds = time.monotonic() - started
        async with pool.acquire() as conn:
            await conn.execute(_END_LEASE, LEASE, holder, json.dumps(result.as_json()))
    return result


class Pruner:
    """The worker's pruning duty: tries for the lease every few seconds, prunes when it gets it."""

    def __init__(self, pool: asyncpg.Pool, settings: Settings, holder: str) -> None:
        self.pool = pool
        self.settings = settings
        self.holder = holder

    async def run(self) -> None:
        every = self.settings.JOB_PRUNE_INTERVAL
        retention = cutoffs(self.settings)
        prunes = any(v is not None for v in retention.values())
        while True:
            try:
                await make_partitions(self.pool, self.settings)
                result = None
                if prunes:
                    result = await prune(self.pool, self.holder, retention,
                                         failed_retention=self.settings.JOB_RETENTION_FAILED, every_s=every)
                if result is not None:
                    log.info("retention: %s", result.describe())
            except (*CONNECTION_ERRORS, asyncpg.PostgresError) as exc:
                # Never let pruning trouble stop the worker; the next run tries again.
                log.warning("retention: pruning failed (%s); trying again later", str(exc).splitlines()[0])
            # Check often enough that the fleet prunes about once per interval, not twice as rarely.
            await asyncio.sleep(min(every / 6, 10.0))


async def make_partitions(pool: asyncpg.Pool, settings: Settings) -> list[str]:
    """The completed jobs' partitions, made ahead: for two partitions' time and a pruner's round
    at least, so that completions always land in one of their own."""
    width = partitions.width_for(settings.JOB_RETENTION_COMPLETED)
    async with pool.acquire() as conn:
        made = await partitions.make_ahead(conn, width, 2 * width + settings.JOB_PRUNE_INTERVAL)
    if made:
        log.info("retention: made %d partition(s) of completed jobs ahead (%s)", len(made), ", ".join(made))
    return made
