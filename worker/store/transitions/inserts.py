"""Enqueue: jobs inserted parents first in one statement (a large batch by COPY), unique keys that
stand for an unfinished job, and the insert audited in the same statement for a batch of several
submitters.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

import asyncpg

from jobdesk.core.dag import order_batch
from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import JobCreate
from jobdesk.core.rules import Actor
from jobdesk.core.validation import check_new_jobs, json_text
from jobdesk.store.listener import JOB_CHANGES_CHANNEL, NEW_JOBS_CHANNEL
from jobdesk.store.transitions import copy_in

DEFAULT_USER_ID = 1  # created by the first migration

# Ids made by new_job_id for these very jobs (JobCreate.made_id) need not be looked for among the
# finished jobs' partitions (sql/041's jobdesk_jobs_check_ids): a statement of only such jobs says
# so, for itself alone (the trigger takes the mark back).
MADE_IDS = " WHERE (SELECT set_config('jobdesk.fresh_ids', 'on', true)) = 'on'"
_FRESH_IDS_SET = "SELECT set_config('jobdesk.fresh_ids', 'on', true)"

_INSERT = """
INSERT INTO jobs_live (id, type, user_id, pipeline_id, input_data, dependent_on_jobs, priority)
SELECT id, type, COALESCE(user_id, $8), pipeline_id, input_data::jsonb, dependent_on_jobs::jsonb,
       priority
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[])
       WITH ORDINALITY AS t(id, type, user_id, pipeline_id, input_data, dependent_on_jobs,
                            priority, ord){made}
 ORDER BY ord
"""

UNFINISHED = "('queued', 'in_progress', 'waiting_approval')"  # the statuses a unique_key is held in
# The arbiter of jobs_unique_key_idx: a job whose key an unfinished job holds is not inserted.
UNIQUE_CONFLICT = f"ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status IN {UNFINISHED} DO NOTHING"


def _insert_full(conflict: str, returning: str, traces: str = "$11", made: str = "") -> str:
    """The insert with a time, a key and a trace context: three more columns ($9, $10 and
    `traces`), then `conflict` and `returning`; `made`: MADE_IDS, or nothing."""
    return f"""
INSERT INTO jobs_live (id, type, user_id, pipeline_id, input_data, dependent_on_jobs, priority, scheduled_at,
                  unique_key, trace_context)
SELECT id, type, COALESCE(user_id, $8), pipeline_id, input_data::jsonb, dependent_on_jobs::jsonb,
       priority, scheduled_at, unique_key, trace_context::jsonb
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[],
              $9::timestamptz[], $10::text[], {traces}::text[])
       WITH ORDINALITY AS t(id, type, user_id, pipeline_id, input_data, dependent_on_jobs,
                            priority, scheduled_at, unique_key, trace_context, ord){made}
 ORDER BY ord
{conflict}
RETURNING {returning}
"""


# With a time, a key or a trace context: the ids actually inserted come back.
_INSERT_FULL = _insert_full(UNIQUE_CONFLICT, "id", made=MADE_IDS)
_INSERT_FULL_GIVEN = _insert_full(UNIQUE_CONFLICT, "id")
_INSERT_MADE = _INSERT.format(made=MADE_IDS)
_INSERT_GIVEN = _INSERT.format(made="")



class _KeyRace(Exception):
    """A unique key was taken by a concurrent enqueue between the look-up and the insert."""



async def enqueue(conn: asyncpg.Connection, jobs: Sequence[JobCreate]) -> list[str]:
    """Insert jobs, parents before children, in one statement; return, per job given, the id
    that stands for it: its own, or that of the unfinished job that holds its unique key.

    Refuses (InvalidJob, nothing inserted) a malformed job, an id already taken, an unknown
    user, a dependency on an unknown job, and a cycle.
    """
    return [job_id for job_id, _ in await enqueue_detailed(conn, jobs)]


KEY_RACE_ATTEMPTS = 5


async def enqueue_detailed(conn: asyncpg.Connection, jobs: Sequence[JobCreate],
                           debounced: set[str] | None = None) -> list[tuple[str, bool]]:
    """`enqueue`, telling duplicates apart: per job given, (the id that stands for it, whether
    it was a duplicate of an unfinished job with the same unique key, so nothing was created).

    Jobs of the batch that depend on a duplicate depend on the job that holds the key instead.
    A duplicate with a `debounce` whose key a queued job holds updates that job instead (see
    `_debounce`); the ids given of those go in `debounced`.
    """
    if not jobs:
        return []
    check_new_jobs(jobs)
    if all(j.unique_key is None for j in jobs):
        await _insert(conn, jobs)
        return [(j.id, False) for j in jobs]
    for attempt in range(KEY_RACE_ATTEMPTS):
        try:
            # A savepoint (or a transaction): a lost race leaves nothing behind.
            async with conn.transaction():
                return await _enqueue_unique(conn, jobs, last=attempt == KEY_RACE_ATTEMPTS - 1,
                                             debounced=debounced)
        except _KeyRace:
            continue
    raise InvalidJob("unique keys kept changing hands while enqueueing; try again", field="unique_key")


async def _enqueue_unique(conn: asyncpg.Connection, jobs: Sequence[JobCreate], *, last: bool,
                          debounced: set[str] | None = None) -> list[tuple[str, bool]]:
    keys = sorted({j.unique_key for j in jobs if j.unique_key is not None})
    holders = {r["unique_key"]: r["id"] for r in await conn.fetch(
        f"SELECT unique_key, id FROM jobs WHERE unique_key = ANY($1::text[]) AND status IN {UNFINISHED}", keys)}
    stands: dict[str, str] = {}  # id of a duplicate -> id of the job that holds its key
    fresh: list[JobCreate] = []
    if any(j.debounce is not None for j in jobs):
        jobs = await _debounce_starts(conn, jobs)
    for job in jobs:
        key = job.unique_key
        if key is not None and key in holders:
            stands[job.id] = holders[key]
            if job.debounce is not None and await _debounce(conn, holders[key], job) and debounced is not None:
                debounced.add(job.id)
            continue
        if key is not None:
            holders[key] = job.id  # a later job of the batch with this key is its duplicate
        fresh.append(job)
    if stands:
        fresh = [replace(j, dependent_on_jobs=list(dict.fromkeys(stands.get(d, d) for d in j.dependent_on_jobs)))
                 if any(d in stands for d in j.dependent_on_jobs) else j for j in fresh]
    if fresh:
        try:
            inserted = await _insert(conn, fresh)
        except InvalidJob:
            if last:
                raise
            raise _KeyRace from None  # a dependant of a job that lost its key to a concurrent enqueue
        if inserted is not None and len(inserted) < len(fresh):
            raise _KeyRace
    return [(stands.get(j.id, j.id), j.id in stands) for j in jobs]


# Debounce: the queued job holding the key, never started (one queued for a retry or put back by
# a stopping worker has started), takes the new input, and its start
# moves to now plus the debounce, no later than its first enqueue plus debounce_max. A start
# that has come is cleared (the job is runnable); a later one waits in jobs_waiting_idx.
_DEBOUNCE = """
WITH moved AS (
    SELECT id, LEAST(now() + make_interval(secs => $3), created_at + make_interval(secs => $4)) AS start_at
      FROM jobs WHERE id = $1 AND status = 'queued' AND is_active AND started_at IS NULL FOR UPDATE
)
UPDATE jobs AS j
   SET input_data = $2::text::jsonb, scheduled_at = m.start_at,
       run_at = CASE WHEN m.start_at > now() THEN m.start_at END, updated_at = now()
  FROM moved m
 WHERE j.id = m.id
RETURNING j.id"""


async def _debounce(conn: asyncpg.Connection, holder: str, job: JobCreate) -> bool:
    """Debounce the queued job `holder` with this enqueue of its key; False when it has started
    (even if it is queued again for a retry) or waits for approval: then this enqueue is a plain
    duplicate."""
    updated = await conn.fetchval(_DEBOUNCE, holder, json_text(job.input_data, "input_data", job_id=job.id,
                                                               field="input_data"),
                                  job.debounce, job.debounce_max)
    return updated is not None


async def _debounce_starts(conn: asyncpg.Connection, jobs: Sequence[JobCreate]) -> list[JobCreate]:
    """Jobs with a debounce start no earlier than now (the database's clock) plus their debounce."""
    now = await conn.fetchval("SELECT now()")
    out = []
    for job in jobs:
        if job.debounce is not None:
            start = now + timedelta(seconds=job.debounce)
            job = replace(job, scheduled_at=max(start, job.scheduled_at) if job.scheduled_at else start)
        out.append(job)
    return out


def _insert_args(ordered: Sequence[JobCreate]) -> list[object]:
    """The arrays `_INSERT` reads ($1 to $8)."""
    return [
        [j.id for j in ordered], [j.type for j in ordered], [j.user_id for j in ordered],
        [j.pipeline_id for j in ordered],
        [json_text(j.input_data, "input_data", job_id=j.id, field="input_data") for j in ordered],
        [json_text(list(j.dependent_on_jobs)) for j in ordered], [j.priority for j in ordered], DEFAULT_USER_ID]


async def _check_outside(conn: asyncpg.Connection, ordered: Sequence[JobCreate], outside: set[str]) -> None:
    """Refuse a batch that depends on a job that does not exist, naming the job and the field."""
    if not outside:
        return
    known = {r["id"] for r in await conn.fetch("SELECT id FROM jobs WHERE id = ANY($1::text[])", sorted(outside))}
    missing = sorted(outside - known)
    if missing:
        child = next(j.id for j in ordered if missing[0] in j.dependent_on_jobs)
        raise InvalidJob(f"dependency {missing[0]} of job {child} is not a known job", job_id=child,
                         field="dependent_on_jobs")


@contextlib.contextmanager
def _insert_errors(ordered: Sequence[JobCreate]) -> Iterator[None]:
    """An insert's refusals as InvalidJob; a unique key taken since its look-up as `_KeyRace`."""
    try:
        yield
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "jobs_unique_key_idx":  # by COPY, which cannot skip the row
            raise _KeyRace from None
        raise InvalidJob(f"a job with this id already exists ({exc.detail or exc})", field="id") from None
    except asyncpg.ForeignKeyViolationError as exc:
        users = sorted({str(j.user_id) for j in ordered if j.user_id is not None})
        raise InvalidJob(f"unknown user {', '.join(users) or '?'} ({exc.detail or exc})", field="user_id") from None
    except asyncpg.PostgresError as exc:
        if getattr(exc, "sqlstate", "").startswith("JD"):
            raise InvalidJob(str(exc)) from None
        raise


def _trace_texts(ordered: Sequence[JobCreate]) -> list[str | None]:
    """The jobs' trace contexts as JSON text (NULL where none)."""
    return [None if j.trace_context is None else json_text(j.trace_context) for j in ordered]


async def _insert(conn: asyncpg.Connection, jobs: Sequence[JobCreate]) -> set[str] | None:
    """Insert checked jobs in one statement; the ids inserted when any has a time, a key or a
    trace context (the plain insert, the common case with tracing off, binds none of them).
    A large batch goes by COPY (see `copy_in`) when the connection has it: every job is inserted,
    or none (a unique key taken since its look-up raises `_KeyRace`), so no ids come back."""
    ordered, outside = order_batch(jobs)
    await _check_outside(conn, ordered, outside)
    full = any(j.scheduled_at is not None or j.unique_key is not None or j.trace_context is not None
               for j in ordered)
    made = all(j.made_id for j in ordered)
    if copy_in.copies(conn, ordered):
        with _insert_errors(ordered):
            await _copy(conn, ordered, full=full, made=made)
        return None
    args = _insert_args(ordered)
    with _insert_errors(ordered):
        if not full:
            await conn.execute(_INSERT_MADE if made else _INSERT_GIVEN, *args)
            return None
        rows = await conn.fetch(_INSERT_FULL if made else _INSERT_FULL_GIVEN, *args, [j.scheduled_at for j in ordered],
                                [j.unique_key for j in ordered], _trace_texts(ordered))
        return {r["id"] for r in rows}


async def _copy(conn: asyncpg.Connection, ordered: Sequence[JobCreate], *, full: bool, made: bool) -> None:
    """COPY the jobs; when every id is made here, after saying so (see MADE_IDS), in the same
    transaction (one of its own if the connection is in none)."""
    if not made:
        await copy_in.copy_jobs(conn, ordered, DEFAULT_USER_ID, full=full)
        return
    in_tx = conn.is_in_transaction() if isinstance(conn, asyncpg.Connection) else True
    async with contextlib.AsyncExitStack() as stack:
        if not in_tx:
            await stack.enter_async_context(conn.transaction())
        await conn.execute(_FRESH_IDS_SET)
        await copy_in.copy_jobs(conn, ordered, DEFAULT_USER_ID, full=full)


@functools.lru_cache(maxsize=8)
def _insert_audited_sql(returning: str, made: bool = True) -> str:
    """Jobs without unique keys, inserted and audited in one statement (atomic without a
    transaction), answering `returning` (SQL over the inserted rows, `ins`) per job. Its
    notifications are the caller's to send after the commit (`notify_inserted`): the statement
    sets `jobdesk.notify_after_commit` (sql/032), which the insert trigger reads at its end."""
    return f"""
WITH later AS (
    SELECT set_config('jobdesk.notify_after_commit', 'on', true) AS setting
), ins AS ({_insert_full("", "*", traces="$15", made=MADE_IDS if made else "")}
), audit AS (
    INSERT INTO audit_log (os_user, source, actor, action, job_ids)
    SELECT o, s, a, 'submit', string_to_array(i, ',')
      FROM unnest($11::text[], $12::text[], $13::text[], $14::text[]) AS t(o, s, a, i)
)
SELECT ins.id, {returning}, ins.priority AS notice_priority, ins.seq AS notice_seq
  FROM ins WHERE (SELECT setting FROM later) = 'on'"""


# What the insert trigger would have sent at the commit (sql/031, sql/032), sent after it in a
# transaction of its own, which writes nothing: it holds the notification queue's lock for no
# WAL flush.
_NOTIFY_INSERTED = f"""
SELECT pg_notify('{JOB_CHANGES_CHANNEL}', $1), pg_notify('{NEW_JOBS_CHANNEL}', $2)"""


async def notify_inserted(conn: asyncpg.Connection, rows: Mapping[str, asyncpg.Record]) -> None:
    """Tell the listeners of the jobs `enqueue_audited` inserted (its `rows`), once its statement
    committed, as the insert trigger tells them: the ids on the channel of job changes (or '*'
    past 150), and the workers of new work with how low the jobs go in the claim's walk
    ('<highest priority>:<lowest seq>', which lowers the workers' walk floors)."""
    if not rows:
        return
    top = max(r["notice_priority"] for r in rows.values())
    low = min(r["notice_seq"] for r in rows.values())
    await conn.execute(_NOTIFY_INSERTED, ",".join(rows) if len(rows) <= 150 else "*", f"{top}:{low}")


async def enqueue_audited(conn: asyncpg.Connection, submissions: Sequence[tuple[Actor, JobCreate]],
                          returning: str) -> dict[str, asyncpg.Record]:
    """Enqueue the jobs of several submitters and audit each one's submission, in one statement
    and one round trip; by id, a row of `returning` (SQL over the inserted row, `ins`) per job.
    For jobs without unique keys (see `enqueue_detailed` for those); refusals as `enqueue`'s.
    The caller then calls `notify_inserted` with the rows, of which the commit notified nobody."""
    jobs = [job for _, job in submissions]
    for job in jobs:
        if job.unique_key is not None:
            raise ValueError("enqueue_audited takes jobs without a unique_key")
    check_new_jobs(jobs)
    ordered, outside = order_batch(jobs)
    await _check_outside(conn, ordered, outside)
    by_actor: dict[Actor, list[str]] = {}
    for actor, job in submissions:
        by_actor.setdefault(actor, []).append(job.id)
    actors = list(by_actor)
    with _insert_errors(ordered):
        rows = await conn.fetch(_insert_audited_sql(returning, all(j.made_id for j in ordered)), *_insert_args(ordered),
                                [j.scheduled_at for j in ordered], [None] * len(ordered),
                                [a.os_user for a in actors], [a.source for a in actors], [a.name for a in actors],
                                [",".join(by_actor[a]) for a in actors], _trace_texts(ordered))
    return {r["id"]: r for r in rows}
