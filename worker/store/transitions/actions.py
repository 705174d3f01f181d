"""Operator actions on jobs: cancel, retry, approve, reject, retry downstream, cancel a pipeline,
and the audit log they write.

Each locks the rows it acts on, checks that the action is legal for every one of them
(`jobdesk.core.rules.LEGAL_FROM`), and changes nothing otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from jobdesk.core.errors import IllegalTransition, InvalidJob, JobNotFound
from jobdesk.core.fingerprint import fingerprint
from jobdesk.core.models import JobCreate, Status
from jobdesk.core.rules import LEGAL_FROM, Actor, is_legal
from jobdesk.core.validation import json_text
from jobdesk.store import durable, job_reports
from jobdesk.store.moved_rows import locking_fetch
from jobdesk.store.transitions.cascade import cancel_downstream
from jobdesk.store.transitions.inserts import enqueue

CONTROL_CHANNEL = "jobdesk_control"  # workers LISTEN here for the cancel of a running job


async def _lock_and_check(conn: asyncpg.Connection, action: str, job_ids: Sequence[str]) -> list[asyncpg.Record]:
    ids = list(dict.fromkeys(job_ids))
    if not ids:
        raise JobNotFound("no job given")
    rows = await locking_fetch(conn, "SELECT id, status, pending_next_jobs, result_data FROM jobs "
                               "WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE", ids)
    found = {r["id"] for r in rows}
    missing = [i for i in ids if i not in found]
    if missing:
        raise JobNotFound(f"no job with id {missing[0]}")
    illegal = [r for r in rows if not is_legal(action, r["status"])]
    if illegal:
        first = illegal[0]
        allowed = ", ".join(sorted(LEGAL_FROM[action]))
        more = f" (and {len(illegal) - 1} more)" if len(illegal) > 1 else ""
        raise IllegalTransition(f"cannot {action} job {first['id']}: it is {first['status']}{more}; "
                                f"{action} applies to {allowed} jobs")
    return rows


async def _audit(conn: asyncpg.Connection, actor: Actor, action: str, job_ids: Sequence[str],
                 reason: str | None = None) -> None:
    await conn.execute("INSERT INTO audit_log (os_user, source, actor, action, job_ids, reason) "
                       "VALUES ($1, $2, $3, $4, $5::text[], $6)", actor.os_user, actor.source, actor.name,
                       action, list(job_ids), reason)


async def audit_submissions(conn: asyncpg.Connection, submissions: Sequence[tuple[Actor, Sequence[str]]]) -> None:
    """One `submit` audit row per actor for jobs enqueued together (one statement for a batch)."""
    by_actor: dict[Actor, list[str]] = {}
    for actor, ids in submissions:
        by_actor.setdefault(actor, []).extend(ids)
    if not by_actor:
        return
    actors = list(by_actor)
    await conn.execute(
        "INSERT INTO audit_log (os_user, source, actor, action, job_ids) "
        "SELECT o, s, a, 'submit', string_to_array(i, ',') "
        "  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS t(o, s, a, i)",
        [a.os_user for a in actors], [a.source for a in actors], [a.name for a in actors],
        [",".join(by_actor[a]) for a in actors])


async def audit(conn: asyncpg.Connection, actor: Actor, action: str, reason: str | None = None,
                job_ids: Sequence[str] = ()) -> None:
    """Record an operator action that is not a job transition (on a schedule, say)."""
    await _audit(conn, actor, action, job_ids, reason)



async def cancel(conn: asyncpg.Connection, job_ids: Sequence[str], actor: Actor, *,
                 reason: str | None = None) -> list[str]:
    """Cancel jobs and everything downstream of them; return every id cancelled.

    Queued and waiting jobs become `cancelled` at once. A running job is flagged inactive and
    its worker is told over NOTIFY; the worker stops it and records `cancelled`.
    """
    async with conn.transaction():
        rows = await _lock_and_check(conn, "cancel", job_ids)
        idle = [r["id"] for r in rows if r["status"] != Status.IN_PROGRESS]
        running = [r["id"] for r in rows if r["status"] == Status.IN_PROGRESS]
        if idle:
            await conn.execute("UPDATE jobs SET status = 'cancelled', is_active = false, updated_at = now() "
                               "WHERE id = ANY($1::text[])", idle)
        if running:
            await conn.execute("UPDATE jobs SET is_active = false, updated_at = now() "
                               "WHERE id = ANY($1::text[])", running)
            for job_id in running:
                await conn.execute("SELECT pg_notify($1, $2)", CONTROL_CHANNEL,
                                   json.dumps({"cancel": job_id}))
        cascaded = await cancel_downstream(conn, idle) if idle else []
        await _audit(conn, actor, "cancel", [r["id"] for r in rows], reason)
    return [*idle, *running, *cascaded]


async def retry(conn: asyncpg.Connection, job_ids: Sequence[str], actor: Actor, *,
                reason: str | None = None, fresh: bool = False) -> list[str]:
    """Put failed or cancelled jobs back to `queued` with a fresh retry budget; history stays,
    and so do a durable processor's stored steps unless `fresh` (a retry from scratch)."""
    async with conn.transaction():
        rows = await _lock_and_check(conn, "retry", job_ids)
        ids = [r["id"] for r in rows]
        try:
            async with conn.transaction():
                await conn.execute("""
                    UPDATE jobs SET status = 'queued', is_active = true, retry_count = 0, next_retry_at = NULL,
                                    run_at = NULL, error_message = NULL, error_fingerprint = NULL,
                                    completed_at = NULL, worker_id = NULL, updated_at = now()
                     WHERE id = ANY($1::text[])""", ids)
        except asyncpg.UniqueViolationError as exc:
            raise IllegalTransition(f"cannot retry: another unfinished job holds the same unique key "
                                    f"({exc.detail or exc})") from None
        await job_reports.clear_progress(conn, ids)  # it runs again from the start
        if fresh:
            await durable.clear_steps(conn, ids)
        await _audit(conn, actor, "retry from scratch" if fresh else "retry", ids, reason)
    return ids


async def retry_with_input(conn: asyncpg.Connection, job_id: str, input_data: dict[str, object], actor: Actor, *,
                           fresh: bool = False) -> list[str]:
    """Retry a failed or cancelled job with a new input, in one transaction with the change of
    input: either both happen or neither. The old input is kept in the audit log (an `edit input`
    row whose reason is the old input as JSON), then the retry is audited as `retry` is."""
    if not isinstance(input_data, dict):
        raise InvalidJob("input_data must be a JSON object", job_id=job_id, field="input_data")
    text = json_text(input_data, "input_data", job_id=job_id, field="input_data")
    async with conn.transaction():
        await _lock_and_check(conn, "retry", [job_id])
        old = await conn.fetchval("SELECT input_data::text FROM jobs WHERE id = $1", job_id)
        await conn.execute("UPDATE jobs SET input_data = $2::text::jsonb WHERE id = $1", job_id, text)
        await _audit(conn, actor, "edit input", [job_id], old)
        return await retry(conn, [job_id], actor, fresh=fresh)


_FAILED_DOWNSTREAM = """
WITH RECURSIVE down(id) AS (
    SELECT unnest($1::text[])
    UNION
    SELECT e.job_id FROM job_dependencies e JOIN down ON e.depends_on_id = down.id
)
SELECT j.id, j.type, j.status FROM jobs j JOIN down USING (id)
 WHERE j.status IN ('failed', 'cancelled')
 ORDER BY j.seq
"""


async def retry_plan(conn: asyncpg.Connection, job_ids: Sequence[str]) -> list[asyncpg.Record]:
    """What "retry failed and downstream" of these jobs would touch: each of them, and every
    job downstream, that is failed or cancelled (id, type, status in enqueue order)."""
    return list(await conn.fetch(_FAILED_DOWNSTREAM, list(dict.fromkeys(job_ids))))


async def retry_downstream(conn: asyncpg.Connection, job_ids: Sequence[str], actor: Actor) -> list[str]:
    """Retry these jobs and every failed or cancelled job downstream of them, in one step.

    Downstream jobs go back to `queued` still blocked by their unfinished parents, so the
    pipeline runs again from the retried jobs on.
    """
    async with conn.transaction():
        await _lock_and_check(conn, "retry", job_ids)
        ids = [r["id"] for r in await retry_plan(conn, job_ids)]
        return await retry(conn, ids, actor)


async def cancel_pipeline(conn: asyncpg.Connection, pipeline_id: str, actor: Actor) -> list[str]:
    """Cancel every job of a pipeline that has not finished; return the ids cancelled."""
    async with conn.transaction():
        rows = await locking_fetch(conn, "SELECT id FROM jobs WHERE pipeline_id = $1 AND is_active "
                                   "AND status IN ('queued', 'waiting_approval', 'in_progress') "
                                   "ORDER BY id FOR UPDATE", pipeline_id)
        if not rows:
            exists = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM jobs WHERE pipeline_id = $1)", pipeline_id)
            if not exists:
                raise JobNotFound(f"no pipeline with id {pipeline_id}")
            raise IllegalTransition(f"pipeline {pipeline_id} has no unfinished job to cancel")
        return await cancel(conn, [r["id"] for r in rows], actor)


async def approve(conn: asyncpg.Connection, job_ids: Sequence[str], actor: Actor, *,
                  reason: str | None = None) -> list[str]:
    """Complete jobs held for approval, release their dependants and create their next jobs;
    `reason` goes to the audit log (a bulk approval's filter)."""
    async with conn.transaction():
        rows = await _lock_and_check(conn, "approve", job_ids)
        ids = [r["id"] for r in rows]
        await conn.execute("""
            UPDATE jobs SET status = 'completed', completed_at = now(), updated_at = now(),
                            pending_next_jobs = NULL
             WHERE id = ANY($1::text[])""", ids)
        children = [JobCreate.from_json(c) for r in rows for c in (r["pending_next_jobs"] or [])]
        if children:
            await enqueue(conn, children)
        await _audit(conn, actor, "approve", ids, reason)
    return ids


async def reject(conn: asyncpg.Connection, job_ids: Sequence[str], reason: str, actor: Actor, *,
                 note: str | None = None) -> list[str]:
    """Fail jobs held for approval, with the reason as their error; `note` follows the reason in
    the audit log (a bulk rejection's filter)."""
    if not reason or not reason.strip():
        raise InvalidJob("a rejection needs a reason")
    error = f"rejected: {reason.strip()}"
    async with conn.transaction():
        rows = await _lock_and_check(conn, "reject", job_ids)
        ids = [r["id"] for r in rows]
        await conn.execute("""
            UPDATE jobs SET status = 'failed', error_message = $2, error_fingerprint = $3, updated_at = now(),
                            pending_next_jobs = NULL
             WHERE id = ANY($1::text[])""", ids, error, fingerprint(error))
        await _audit(conn, actor, "reject", ids, reason.strip() + (f" ({note})" if note else ""))
    return ids
