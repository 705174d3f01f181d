"""Jobs' progress and log lines in the database (`job_progress`, `job_logs`, migration 027).

A worker writes what its running jobs reported in one statement per flush, whatever the number
of jobs and lines: the progress rows upserted, the log lines inserted, and the changed jobs
notified on `jobdesk_job_changes` (the console and the API's streams read their progress again).
Nothing here changes a job's status: progress is cleared by the retry transitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg

from jobdesk.core.job_report import JobLogLine, JobProgress, LogLine, Progress

CHANGES_CHANNEL = "jobdesk_job_changes"  # the channel of migration 003's triggers
NOTIFY_MAX_IDS = 150  # as the triggers: more ids than this are announced as `*`

# A progress older than the one stored is not written over it (two flushes may cross). A job's rows
# are written only while it exists: its key is locked as a foreign key's check would (sql/027).
_WRITE = """
WITH p AS (
    INSERT INTO job_progress (job_id, fraction, message, at)
    SELECT u.job_id, u.fraction, u.message, u.at
      FROM unnest($1::varchar[], $2::float8[], $3::text[], $4::timestamptz[]) AS u(job_id, fraction, message, at)
      JOIN jobs j ON j.id = u.job_id
       FOR KEY SHARE OF j
    ON CONFLICT (job_id) DO UPDATE SET fraction = EXCLUDED.fraction, message = EXCLUDED.message, at = EXCLUDED.at
     WHERE job_progress.at <= EXCLUDED.at
    RETURNING job_id
), l AS (
    INSERT INTO job_logs (job_id, attempt, seq, at, level, logger, message, trace_id, span_id)
    SELECT u.* FROM unnest($5::varchar[], $6::int[], $7::int[], $8::timestamptz[], $9::varchar[], $10::text[],
                           $11::text[], $12::text[], $13::text[])
                 AS u(job_id, attempt, seq, at, level, logger, message, trace_id, span_id)
      JOIN jobs j ON j.id = u.job_id
       FOR KEY SHARE OF j
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM l) AS lines,
       (SELECT CASE WHEN count(*) = 0 THEN NULL
                    ELSE pg_notify($14, CASE WHEN count(*) > $15 THEN '*' ELSE string_agg(job_id, ',') END) END
          FROM p) AS notified
"""


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


async def write(conn: asyncpg.Connection, progress: Sequence[tuple[str, Progress]],
                lines: Sequence[tuple[str, int, LogLine]]) -> int:
    """Upsert each job's last progress and insert the log lines (job id, attempt, line), in one
    statement; return how many lines were stored. Jobs deleted meanwhile are left out."""
    if not progress and not lines:
        return 0
    row = await conn.fetchrow(
        _WRITE,
        [job_id for job_id, _ in progress], [p.fraction for _, p in progress], [p.message for _, p in progress],
        [_at(p.at) for _, p in progress],
        [job_id for job_id, _, _ in lines], [attempt for _, attempt, _ in lines], [ln.seq for _, _, ln in lines],
        [_at(ln.at) for _, _, ln in lines], [ln.level for _, _, ln in lines], [ln.logger for _, _, ln in lines],
        [ln.message for _, _, ln in lines], [ln.trace_id for _, _, ln in lines], [ln.span_id for _, _, ln in lines],
        CHANGES_CHANNEL, NOTIFY_MAX_IDS)
    return int(row["lines"]) if row is not None else 0


async def clear_progress(conn: asyncpg.Connection, job_ids: Sequence[str]) -> None:
    """Forget the progress of jobs that run again from the start (a retry)."""
    await conn.execute("DELETE FROM job_progress WHERE job_id = ANY($1::text[])", list(job_ids))


async def fetch_progress(conn: asyncpg.Connection, job_ids: Sequence[str]) -> dict[str, JobProgress]:
    rows = await conn.fetch("SELECT job_id, fraction, message, at FROM job_progress WHERE job_id = ANY($1::text[])",
                            list(job_ids))
    return {r["job_id"]: JobProgress(r["fraction"], r["message"], r["at"]) for r in rows}


_LOGS = """
SELECT attempt, seq, at, level, logger, message, trace_id, span_id FROM job_logs
 WHERE job_id = $1 AND (attempt, seq) > ($2, $3)
 ORDER BY attempt, seq LIMIT $4
"""


async def fetch_logs(conn: asyncpg.Connection, job_id: str, *, after: tuple[int, int] = (0, 0),
                     limit: int | None = None) -> list[JobLogLine]:
    """A job's log lines in order (by attempt, then as emitted), those after the position
    `after` (attempt, seq) only; at most `limit` (None: all, which the bounds per attempt keep
    to about a megabyte per attempt)."""
    rows = await conn.fetch(_LOGS, job_id, after[0], after[1], limit)
    return [JobLogLine(**dict(r)) for r in rows]
