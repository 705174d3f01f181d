"""The worker's outcomes: completed (or held for approval), failed (retried or not), put back,
unclaimed, cancelled while running, and the jobs of lost workers taken back.

Every write is fenced by ownership: it only touches a row that is still `in_progress` under the
same worker and attempt, so a worker that has lost a job can no longer write to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import asyncpg

from jobdesk.core.errors import InvalidJob
from jobdesk.core.fingerprint import fingerprint
from jobdesk.core.models import Job, JobCreate, ProcessorResult, Status
from jobdesk.core.rules import retry_decision
from jobdesk.store.transitions.cascade import cancel_downstream
from jobdesk.store.transitions.claim import complete_and_claim
from jobdesk.store.transitions.inserts import enqueue

_HOLD_FOR_APPROVAL = """
UPDATE jobs
   SET status = 'waiting_approval', result_data = $4, pending_next_jobs = $5,
       updated_at = now(), error_message = NULL, error_fingerprint = NULL, next_retry_at = NULL,
       worker_id = NULL
 WHERE id = $2 AND worker_id = $1 AND attempts = $3 AND status = 'in_progress' AND is_active
RETURNING id
"""


def _inherit(parent: Job, children: Iterable[JobCreate]) -> list[JobCreate]:
    out = []
    for child in children:
        if not isinstance(child, JobCreate):
            raise InvalidJob(f"next_jobs of job {parent.id} must hold JobCreate objects")
        if child.user_id is None:
            child.user_id = parent.user_id
        if child.pipeline_id is None:
            child.pipeline_id = parent.pipeline_id
        if child.trace_context is None:  # untraced here: the trace the parent was enqueued in goes on
            child.trace_context = parent.trace_context
        if not child.dependent_on_jobs:  # a next job comes after the job that created it
            child.dependent_on_jobs = [parent.id]
        out.append(child)
    return out


async def complete_batch(conn: asyncpg.Connection, worker_id: str,
                         done: Sequence[tuple[Job, ProcessorResult]]) -> set[str]:
    """Record finished jobs: `completed`, or `waiting_approval` where the result asks for it.

    The next jobs of completed results are created in the same transaction. Returns the ids
    written; a job this worker no longer owns is skipped.
    """
    plain = [(job, res) for job, res in done if not res.requires_approval]
    held = [(job, res) for job, res in done if res.requires_approval]
    needs_tx = len(held) > 0 or any(res.next_jobs for _, res in plain)
    if not needs_tx:
        return (await complete_and_claim(conn, worker_id, (), 0, plain))[0]
    written: set[str] = set()
    async with conn.transaction():
        if plain:
            written |= (await complete_and_claim(conn, worker_id, (), 0, plain))[0]
            children = [c for job, res in plain if job.id in written for c in _inherit(job, res.next_jobs)]
            if children:
                await enqueue(conn, children)
        for job, res in held:
            pending = [c.to_json() for c in _inherit(job, res.next_jobs)]
            row = await conn.fetchrow(_HOLD_FOR_APPROVAL, worker_id, job.id, job.attempt,
                                      res.result_data, pending or None)
            if row:
                written.add(job.id)
    return written


_FAIL = """
WITH upd AS (
    UPDATE jobs
       SET status = $4::text, retry_count = $5,
           next_retry_at = CASE WHEN $4::text = 'queued' THEN now() + make_interval(secs => $6) END,
           run_at = CASE WHEN $4::text = 'queued' AND $6 > 0 THEN now() + make_interval(secs => $6) END,
           error_message = $7, error_fingerprint = $10, updated_at = now(), worker_id = NULL
     WHERE id = $1 AND worker_id = $2 AND attempts = $3 AND status = 'in_progress'
    RETURNING id, type, started_at
), retried AS (  -- a job queued to run again starts its progress afresh
    DELETE FROM job_progress p USING upd WHERE p.job_id = upd.id AND $4::text = 'queued'
)
INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, outcome, error_message, traceback,
                          error_fingerprint, job_type)
SELECT id, $3, $2, started_at, $9, $7, $8, $10, type FROM upd
RETURNING job_id
"""



@dataclass(frozen=True)
class FailOutcome:
    """What a failed attempt led to."""

    written: bool  # False if the worker no longer owned the job
    status: Status  # queued (to retry) or failed
    retry_count: int
    delay: float | None



async def fail_attempt(conn: asyncpg.Connection, worker_id: str, job: Job, error: str,
                       traceback: str | None, *, intervals: Sequence[float], permanent: bool = False,
                       outcome: str = "failed") -> FailOutcome:
    """Record a failed attempt in the history, and queue the job for retry or fail it for good."""
    status, retries, delay = retry_decision(job.retry_count, intervals, permanent)
    row = await conn.fetchrow(_FAIL, job.id, worker_id, job.attempt, str(status), retries,
                              delay or 0.0, error, traceback, outcome, fingerprint(error))
    return FailOutcome(row is not None, status, retries, delay)


_PUT_BACK = """
WITH upd AS (
    UPDATE jobs SET status = 'queued', worker_id = NULL, updated_at = now()
     WHERE id = ANY($2::text[]) AND worker_id = $1 AND status = 'in_progress'
    RETURNING id, type, attempts, started_at
)
INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, outcome, error_message, error_fingerprint,
                          job_type)
SELECT id, attempts, $1, started_at, 'interrupted', $3, $4, type FROM upd
RETURNING job_id
"""


async def put_back(conn: asyncpg.Connection, worker_id: str, job_ids: Sequence[str], reason: str) -> set[str]:
    """Give running jobs back to the queue without spending a retry (the worker is stopping)."""
    rows = await conn.fetch(_PUT_BACK, worker_id, list(job_ids), reason, fingerprint(reason))
    return {r["job_id"] for r in rows}


_UNCLAIM = """
UPDATE jobs SET status = 'queued', worker_id = NULL, attempts = attempts - 1, started_at = NULL,
                updated_at = now()
 WHERE id = ANY($2::text[]) AND worker_id = $1 AND status = 'in_progress'
"""


async def unclaim(conn: asyncpg.Connection, worker_id: str, job_ids: Sequence[str]) -> None:
    """Give back claimed jobs that never started; as if they had not been claimed."""
    await conn.execute(_UNCLAIM, worker_id, list(job_ids))


_ORPHANS = """
SELECT id FROM jobs
 WHERE status = 'in_progress' AND worker_id = $1 AND NOT (id = ANY($2::text[]))
   AND updated_at < now() - make_interval(secs => $3)
"""


async def release_orphans(conn: asyncpg.Connection, worker_id: str, known: Sequence[str],
                          older_than_s: float) -> list[str]:
    """Give back jobs the database says this worker owns but the worker does not know of.

    That happens when a claim committed but its answer was lost with the connection. Only
    jobs claimed more than `older_than_s` ago count, so a claim still in flight is left alone.
    """
    ids = [r["id"] for r in await conn.fetch(_ORPHANS, worker_id, list(known), older_than_s)]
    if ids:
        await conn.execute(_UNCLAIM, worker_id, ids)
    return ids


_MARK_CANCELLED = """
WITH upd AS (
    UPDATE jobs SET status = 'cancelled', worker_id = NULL, updated_at = now(),
                    error_fingerprint = CASE WHEN error_message IS NULL THEN $4 ELSE error_fingerprint END,
                    error_message = COALESCE(error_message, 'cancelled while running')
     WHERE id = $1 AND worker_id = $2 AND attempts = $3 AND status = 'in_progress' AND NOT is_active
    RETURNING id, type, started_at
)
INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, outcome, error_message, error_fingerprint,
                          job_type)
SELECT id, $3, $2, started_at, 'cancelled', 'cancelled while running', $4, type FROM upd
RETURNING job_id
"""


async def mark_cancelled(conn: asyncpg.Connection, worker_id: str, job: Job) -> bool:
    """Record that a running job stopped because an operator cancelled it; cascade downstream.
    Only a job whose cancel was asked for (`is_active` false) is recorded so: a result that
    could not be written for another reason (the claim lost in a failover, say) cancels nothing."""
    async with conn.transaction():
        row = await conn.fetchrow(_MARK_CANCELLED, job.id, worker_id, job.attempt,
                                  fingerprint("cancelled while running"))
        if row:
            await cancel_downstream(conn, [job.id])
    return row is not None


_RESCUE = """
WITH victims AS (
    SELECT j.id, j.type, j.worker_id, j.attempts, j.retry_count, j.started_at, j.is_active
      FROM jobs j
     WHERE j.status = 'in_progress' AND j.worker_id IS DISTINCT FROM $2
       AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.id = j.worker_id
                          AND w.state IN ('running', 'paused', 'draining'))
       -- A worker that is known and gone loses its jobs at once; a job whose worker never
       -- registered (set by hand, say) waits out the lease from its last update.
       AND (EXISTS (SELECT 1 FROM workers w WHERE w.id = j.worker_id)
            OR j.updated_at < now() - make_interval(secs => $1))
       FOR UPDATE OF j SKIP LOCKED
), upd AS (
    UPDATE jobs j
       SET status = CASE WHEN NOT v.is_active THEN 'cancelled'
                         WHEN v.retry_count < cardinality($3::float8[]) THEN 'queued'
                         ELSE 'failed' END,
           retry_count = CASE WHEN v.is_active AND v.retry_count < cardinality($3::float8[])
                              THEN v.retry_count + 1 ELSE v.retry_count END,
           next_retry_at = CASE WHEN v.is_active AND v.retry_count < cardinality($3::float8[])
                                THEN now() + make_interval(secs => ($3::float8[])[v.retry_count + 1]) END,
           run_at = CASE WHEN v.is_active AND v.retry_count < cardinality($3::float8[])
                         THEN now() + make_interval(secs => ($3::float8[])[v.retry_count + 1]) END,
           error_message = 'worker lost', error_fingerprint = $4, worker_id = NULL, updated_at = now()
      FROM victims v
     WHERE j.id = v.id AND j.status = 'in_progress'
    RETURNING j.id, j.type, j.pipeline_id, j.user_id, j.status, j.retry_count, j.attempts,
              v.worker_id AS lost_worker
), hist AS (
    INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, outcome, error_message, error_fingerprint,
                              job_type)
    SELECT v.id, v.attempts, v.worker_id, v.started_at, 'lost', 'worker lost', $4, v.type FROM victims v
)
SELECT * FROM upd
"""


async def rescue_lost_jobs(conn: asyncpg.Connection, me: str, lease_s: float,
                           intervals: Sequence[float]) -> list[asyncpg.Record]:
    """Take back the running jobs of workers that are gone: each counts as a failed attempt
    ("worker lost") and is queued again under the retry rules, or failed once they are used up.

    Safe to run from every worker at once: rows are locked with SKIP LOCKED, and a lost worker's
    later writes are fenced out. Cancelled jobs of a lost worker end `cancelled`.
    """
    async with conn.transaction():
        rows = await conn.fetch(_RESCUE, lease_s, me, [float(i) for i in intervals], fingerprint("worker lost"))
        cancelled = [r["id"] for r in rows if r["status"] == Status.CANCELLED]
        if cancelled:
            await cancel_downstream(conn, cancelled)
    return rows
