"""Failures grouped by the fingerprint of their error (the console's Failures tab).

A group gathers the jobs that failed for good and the failed, lost or interrupted attempts of
the last hours whose error has the same fingerprint (`worker.fingerprint`). The jobs side reads
one partial index alone (fingerprint, type, updated_at of failed jobs); the attempts side reads
the newest rows of the attempt history. Rows written before fingerprints were stored group
under the first line of their error as it is (`job_queries.raw_error_key`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from jobdesk.core.fingerprint import NO_ERROR
from jobdesk.store.jobs import JobFilter, raw_error_key

WINDOW_HOURS = 24
FAILED_OUTCOMES = ("failed", "lost", "interrupted")
GROUP_LIMIT = 500  # groups shown, the largest first


@dataclass
class FailureGroup:
    """Failures sharing one fingerprint."""

    fingerprint: str
    failed_jobs: int = 0  # jobs failed for good now
    attempts: int = 0  # failed, lost or interrupted attempts in the window
    types: list[str] = field(default_factory=list)
    first_seen: datetime | None = None
    last_seen: datetime | None = None

    @property
    def count(self) -> int:
        return self.failed_jobs + self.attempts

    def job_filter(self) -> JobFilter:
        """The jobs of this group, for the job table and for "Retry group"."""
        return JobFilter(fingerprint=self.fingerprint)

    def add(self, kind: str, type: str, n: int, first: datetime, last: datetime) -> None:
        if kind == "job":
            self.failed_jobs += n
        else:
            self.attempts += n
        if type not in self.types:
            self.types.append(type)
        self.first_seen = first if self.first_seen is None else min(self.first_seen, first)
        self.last_seen = last if self.last_seen is None else max(self.last_seen, last)


@dataclass(frozen=True)
class FailureSample:
    """The newest failure of a group: which job, its error and traceback."""

    job_id: str
    type: str
    error_message: str | None
    traceback: str | None


def _groups_sql(user_scoped: bool) -> str:
    user = " AND user_id = $2" if user_scoped else ""
    user_j = " AND j.user_id = $2" if user_scoped else ""
    # A user's attempts: their job is read for its owner (the API's per-user view only).
    user_a = " AND job_id IN (SELECT id FROM jobs WHERE user_id = $2)" if user_scoped else ""
    outcomes = ", ".join(f"'{o}'" for o in FAILED_OUTCOMES)
    return f"""
    SELECT 'job' AS kind, error_fingerprint AS key, type, count(*) AS n,
           min(updated_at) AS first_at, max(updated_at) AS last_at
      FROM jobs WHERE status = 'failed' AND error_fingerprint IS NOT NULL{user}
     GROUP BY error_fingerprint, type
    UNION ALL
    SELECT 'job', {raw_error_key()}, type, count(*), min(updated_at), max(updated_at)
      FROM jobs WHERE status = 'failed' AND error_fingerprint IS NULL{user}
     GROUP BY 2, type
    UNION ALL
    SELECT 'attempt', error_fingerprint, job_type, count(*), min(finished_at), max(finished_at)
      FROM job_attempts
     WHERE outcome IN ({outcomes}) AND finished_at > now() - make_interval(hours => $1)
       AND error_fingerprint IS NOT NULL AND job_type IS NOT NULL{user_a}
     GROUP BY error_fingerprint, job_type
    UNION ALL
    SELECT 'attempt', COALESCE(a.error_fingerprint, {raw_error_key('a.')}), j.type, count(*),
           min(a.finished_at), max(a.finished_at)
      FROM job_attempts a JOIN jobs j ON j.id = a.job_id
     WHERE a.outcome IN ({outcomes}) AND a.finished_at > now() - make_interval(hours => $1)
       AND (a.error_fingerprint IS NULL OR a.job_type IS NULL){user_j}
     GROUP BY 2, j.type
    """


def _mark_sql() -> str:
    outcomes = ", ".join(f"'{o}'" for o in FAILED_OUTCOMES)
    return f"""
    SELECT (SELECT max(updated_at) FROM jobs WHERE status = 'failed') AS last_failed,
           (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'failed' LIMIT $1) AS capped) AS failed,
           (SELECT max(finished_at) FROM job_attempts WHERE outcome IN ({outcomes})) AS last_attempt
    """


MARK_CAP = 10_000


async def failures_mark(conn: asyncpg.Connection) -> tuple[object, ...]:
    """A mark that changes when the failure groups may have: a job failed or an attempt failed
    since (the newest of each), or the failed jobs, counted up to MARK_CAP, are fewer or more.
    Three index reads, however many failures there are: the groups are read again only when it
    changes."""
    row = await conn.fetchrow(_mark_sql(), MARK_CAP + 1)
    return (row["last_failed"], row["failed"], row["last_attempt"])


async def failure_groups(conn: asyncpg.Connection, *, hours: int = WINDOW_HOURS, user_id: int | None = None,
                         limit: int = GROUP_LIMIT) -> list[FailureGroup]:
    """The failure groups, the largest first (at most `limit`)."""
    params: list[object] = [hours, user_id] if user_id is not None else [hours]
    groups: dict[str, FailureGroup] = {}
    for r in await conn.fetch(_groups_sql(user_id is not None), *params):
        key = r["key"] or NO_ERROR
        group = groups.get(key)
        if group is None:
            group = groups[key] = FailureGroup(key)
        group.add(r["kind"], r["type"], r["n"], r["first_at"], r["last_at"])
    ordered = sorted(groups.values(), key=lambda g: (-g.count, g.fingerprint))[:limit]
    for group in ordered:
        group.types.sort()
    return ordered


async def failure_sample(conn: asyncpg.Connection, fingerprint: str, *, hours: int = WINDOW_HOURS,
                         user_id: int | None = None) -> FailureSample | None:
    """The newest failure of the group: its newest job that still carries the error, else the
    newest attempt of the window with it; None when neither is left."""
    params: list[object] = []
    where = JobFilter(fingerprint=fingerprint, user_id=user_id).where(params)
    job = await conn.fetchrow(f"SELECT id, type, error_message FROM jobs WHERE {where} ORDER BY seq DESC LIMIT 1",
                              *params)
    outcomes = ", ".join(f"'{o}'" for o in FAILED_OUTCOMES)
    if job is not None:
        attempt = await conn.fetchrow("SELECT traceback FROM job_attempts WHERE job_id = $1 "
                                      "ORDER BY attempt DESC, id DESC LIMIT 1", job["id"])
        return FailureSample(job["id"], job["type"], job["error_message"], attempt["traceback"] if attempt else None)
    row = await conn.fetchrow(f"""
        SELECT a.job_id, j.type, a.error_message, a.traceback
          FROM job_attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.outcome IN ({outcomes}) AND a.finished_at > now() - make_interval(hours => $2)
           AND COALESCE(a.error_fingerprint, {raw_error_key('a.')}) = $1
           AND ($3::int IS NULL OR j.user_id = $3)
         ORDER BY a.finished_at DESC LIMIT 1""", fingerprint, hours, user_id)
    if row is None:
        return None
    return FailureSample(row["job_id"], row["type"], row["error_message"], row["traceback"])
