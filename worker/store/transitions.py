"""Every change of a job's status, in one place.

The worker, the CLI, the Python API and the console all call these functions; nothing else
writes `jobs.status`. Worker-side writes (`complete_batch`, `fail_attempt`, ...) are fenced by
ownership: they only touch a row that is still `in_progress` under the same worker and
attempt, so a worker that has lost a job can no longer write to it. Operator actions lock the
rows they act on, check that the action is legal for every one of them, and change nothing
otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import json
import logging
import re
import traceback as tb_module
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import asyncpg

from worker.core.dag import order_batch
from worker.core.errors import IllegalTransition, InvalidJob, JobNotFound
from worker.core.fingerprint import fingerprint
from worker.core.limits import ClaimLimits
from worker.core.models import Job, JobCreate, ProcessorResult, Status
from worker.store.jobs import JobFilter

log = logging.getLogger(__name__)

DEFAULT_USER_ID = 1  # created by the first migration
CONTROL_CHANNEL = "jobdesk_control"

# Which statuses each operator action may start from.
LEGAL_FROM: dict[str, frozenset[Status]] = {
    "cancel": frozenset({Status.QUEUED, Status.WAITING_APPROVAL, Status.IN_PROGRESS}),
    "retry": frozenset({Status.FAILED, Status.CANCELLED}),
    "approve": frozenset({Status.WAITING_APPROVAL}),
    "reject": frozenset({Status.WAITING_APPROVAL}),
}


# Which worker states each operator command to a worker may be sent in. A lost worker takes
# none: it is not there to act on it.
WORKER_COMMANDS_LEGAL_FROM: dict[str, frozenset[str]] = {
    "pause": frozenset({"running"}),
    "resume": frozenset({"paused"}),
    "drain": frozenset({"running", "paused"}),
    "stop": frozenset({"running", "paused", "draining"}),
}


def worker_command_is_legal(command: str, state: str) -> bool:
    return state in WORKER_COMMANDS_LEGAL_FROM.get(command, frozenset())


@dataclass(frozen=True)
class Actor:
    """Who asks for an operator action, for the audit log."""

    source: str  # cli, api, console
    os_user: str | None = None
    name: str | None = None  # who, beyond the OS user: an API token's name

    @classmethod
    def current(cls, source: str) -> Actor:
        try:
            user = getpass.getuser()
        except Exception:  # no user name on this system
            user = None
        return cls(source, user)


_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # an escaped NUL, not an escaped backslash before "u0000"


def json_text(value: object, what: str = "the value", *, job_id: str | None = None, field: str | None = None) -> str:
    """JSON text for a jsonb parameter inside an array (asyncpg would read a list as a dimension).

    Refuses what JSON allows but PostgreSQL's jsonb cannot store: a NUL character, and unpaired
    UTF-16 surrogates (which are not Unicode text)."""
    if not value and (value == {} or value == []):  # most inputs and dependency lists of a bulk enqueue
        return "{}" if isinstance(value, dict) else "[]"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidJob(f"{what} is not JSON: {exc}", job_id=job_id, field=field) from None
    if "\\u0000" in text and _NUL.search(text):
        raise InvalidJob(f"{what} contains a NUL character (\\u0000), which PostgreSQL cannot store",
                         job_id=job_id, field=field)
    if not _is_unicode(text):
        raise InvalidJob(f"{what} contains an unpaired surrogate (like \\ud800), which is not Unicode text",
                         job_id=job_id, field=field)
    return text


def _is_unicode(text: str) -> bool:
    """False for a string holding an unpaired surrogate, which UTF-8 cannot encode. ASCII text,
    nearly every job's, is answered without encoding it."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_legal(action: str, status: Status | str) -> bool:
    return Status(status) in LEGAL_FROM[action]


# -- enqueue --------------------------------------------------------------------------------

_INSERT = """
INSERT INTO jobs (id, type, user_id, pipeline_id, input_data, dependent_on_jobs, priority)
SELECT id, type, COALESCE(user_id, $8), pipeline_id, input_data::jsonb, dependent_on_jobs::jsonb,
       priority
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[])
       WITH ORDINALITY AS t(id, type, user_id, pipeline_id, input_data, dependent_on_jobs,
                            priority, ord)
 ORDER BY ord
"""

UNFINISHED = "('queued', 'in_progress', 'waiting_approval')"  # the statuses a unique_key is held in
# The arbiter of jobs_unique_key_idx: a job whose key an unfinished job holds is not inserted.
UNIQUE_CONFLICT = f"ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status IN {UNFINISHED} DO NOTHING"

def _insert_full(conflict: str, returning: str) -> str:
    """The insert with a time and a key: two more columns ($9, $10), then `conflict` and `returning`."""
    return f"""
INSERT INTO jobs (id, type, user_id, pipeline_id, input_data, dependent_on_jobs, priority, scheduled_at,
                  unique_key)
SELECT id, type, COALESCE(user_id, $8), pipeline_id, input_data::jsonb, dependent_on_jobs::jsonb,
       priority, scheduled_at, unique_key
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[],
              $9::timestamptz[], $10::text[])
       WITH ORDINALITY AS t(id, type, user_id, pipeline_id, input_data, dependent_on_jobs,
                            priority, scheduled_at, unique_key, ord)
 ORDER BY ord
{conflict}
RETURNING {returning}
"""


# With a time or a key: the ids actually inserted come back.
_INSERT_FULL = _insert_full(UNIQUE_CONFLICT, "id")

class _KeyRace(Exception):
    """A unique key was taken by a concurrent enqueue between the look-up and the insert."""


def storable_text(text: str) -> bool:
    """Whether PostgreSQL can store this string: no NUL character, no unpaired surrogate."""
    return "\x00" not in text and _is_unicode(text)


def _check_text_fields(job: JobCreate) -> None:
    named = [("type", job.type), ("id", job.id), ("pipeline_id", job.pipeline_id), ("unique_key", job.unique_key)]
    named += [("dependent_on_jobs", d) for d in (job.dependent_on_jobs if isinstance(job.dependent_on_jobs, list)
                                                   else []) if isinstance(d, str)]
    for field, value in named:
        if isinstance(value, str) and not storable_text(value):
            raise InvalidJob(f"{field} contains a NUL character or an unpaired surrogate, which PostgreSQL "
                             f"cannot store", job_id=job.id if field != "id" else None, field=field)


def _check_new_job(job: JobCreate) -> None:
    _check_text_fields(job)
    if not isinstance(job.type, str) or not job.type.strip():
        raise InvalidJob("a job needs a non-empty type", job_id=job.id, field="type")
    if len(job.type) > 255:
        raise InvalidJob(f"job type is longer than 255 characters: {job.type[:40]}…", job_id=job.id, field="type")
    if not isinstance(job.id, str) or not job.id or len(job.id) > 36:
        raise InvalidJob(f"job id must be a string of 1 to 36 characters, got {job.id!r}", field="id")
    if not isinstance(job.input_data, dict):
        raise InvalidJob(f"input_data of job {job.id} must be a JSON object", job_id=job.id,
                         field="input_data")
    if not isinstance(job.dependent_on_jobs, list) or not all(
            isinstance(dep, str) for dep in job.dependent_on_jobs):
        raise InvalidJob(f"dependent_on_jobs of job {job.id} must be a list of job ids", job_id=job.id,
                         field="dependent_on_jobs")
    if job.pipeline_id is not None and (not isinstance(job.pipeline_id, str) or len(job.pipeline_id) > 36):
        raise InvalidJob(f"pipeline id must be a string of at most 36 characters, got {job.pipeline_id!r}",
                         job_id=job.id, field="pipeline_id")
    if job.scheduled_at is not None:
        if not isinstance(job.scheduled_at, datetime):
            raise InvalidJob(f"scheduled_at of job {job.id} must be a datetime", job_id=job.id, field="scheduled_at")
        try:  # a naive time is the local time of this machine
            job.scheduled_at = job.scheduled_at.astimezone(UTC)
        except (OverflowError, ValueError):
            raise InvalidJob(f"scheduled_at of job {job.id} is out of range", job_id=job.id,
                             field="scheduled_at") from None
    if job.unique_key is not None and (not isinstance(job.unique_key, str) or not 1 <= len(job.unique_key) <= 255):
        raise InvalidJob(f"unique_key of job {job.id} must be a string of 1 to 255 characters", job_id=job.id,
                         field="unique_key")


async def enqueue(conn: asyncpg.Connection, jobs: Sequence[JobCreate]) -> list[str]:
    """Insert jobs, parents before children, in one statement; return, per job given, the id
    that stands for it: its own, or that of the unfinished job that holds its unique key.

    Refuses (InvalidJob, nothing inserted) a malformed job, an id already taken, an unknown
    user, a dependency on an unknown job, and a cycle.
    """
    return [job_id for job_id, _ in await enqueue_detailed(conn, jobs)]


KEY_RACE_ATTEMPTS = 5


async def enqueue_detailed(conn: asyncpg.Connection, jobs: Sequence[JobCreate]) -> list[tuple[str, bool]]:
    """`enqueue`, telling duplicates apart: per job given, (the id that stands for it, whether
    it was a duplicate of an unfinished job with the same unique key, so nothing was created).

    Jobs of the batch that depend on a duplicate depend on the job that holds the key instead.
    """
    if not jobs:
        return []
    for job in jobs:
        _check_new_job(job)
    if all(j.unique_key is None for j in jobs):
        await _insert(conn, jobs)
        return [(j.id, False) for j in jobs]
    for attempt in range(KEY_RACE_ATTEMPTS):
        try:
            # A savepoint (or a transaction): a lost race leaves nothing behind.
            async with conn.transaction():
                return await _enqueue_unique(conn, jobs, last=attempt == KEY_RACE_ATTEMPTS - 1)
        except _KeyRace:
            continue
    raise InvalidJob("unique keys kept changing hands while enqueueing; try again", field="unique_key")


async def _enqueue_unique(conn: asyncpg.Connection, jobs: Sequence[JobCreate], *, last: bool) -> list[tuple[str, bool]]:
    keys = sorted({j.unique_key for j in jobs if j.unique_key is not None})
    holders = {r["unique_key"]: r["id"] for r in await conn.fetch(
        f"SELECT unique_key, id FROM jobs WHERE unique_key = ANY($1::text[]) AND status IN {UNFINISHED}", keys)}
    stands: dict[str, str] = {}  # id of a duplicate -> id of the job that holds its key
    fresh: list[JobCreate] = []
    for job in jobs:
        key = job.unique_key
        if key is not None and key in holders:
            stands[job.id] = holders[key]
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


def _insert_args(ordered: Sequence[JobCreate]) -> list[Any]:
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
    """An insert's refusals as InvalidJob."""
    try:
        yield
    except asyncpg.UniqueViolationError as exc:
        raise InvalidJob(f"a job with this id already exists ({exc.detail or exc})", field="id") from None
    except asyncpg.ForeignKeyViolationError as exc:
        users = sorted({str(j.user_id) for j in ordered if j.user_id is not None})
        raise InvalidJob(f"unknown user {', '.join(users) or '?'} ({exc.detail or exc})", field="user_id") from None
    except asyncpg.PostgresError as exc:
        if getattr(exc, "sqlstate", "").startswith("JD"):
            raise InvalidJob(str(exc)) from None
        raise


async def _insert(conn: asyncpg.Connection, jobs: Sequence[JobCreate]) -> set[str] | None:
    """Insert checked jobs in one statement; the ids inserted when any has a time or a key."""
    ordered, outside = order_batch(jobs)
    await _check_outside(conn, ordered, outside)
    full = any(j.scheduled_at is not None or j.unique_key is not None for j in ordered)
    args = _insert_args(ordered)
    with _insert_errors(ordered):
        if not full:
            await conn.execute(_INSERT, *args)
            return None
        rows = await conn.fetch(_INSERT_FULL, *args, [j.scheduled_at for j in ordered],
                                [j.unique_key for j in ordered])
        return {r["id"] for r in rows}


@functools.lru_cache(maxsize=8)
def _insert_audited_sql(returning: str) -> str:
    """Jobs without unique keys, inserted and audited in one statement (atomic without a
    transaction), answering `returning` (SQL over the inserted rows, `ins`) per job."""
    return f"""
WITH ins AS ({_insert_full("", "*")}
), audit AS (
    INSERT INTO audit_log (os_user, source, actor, action, job_ids)
    SELECT o, s, a, 'submit', string_to_array(i, ',')
      FROM unnest($11::text[], $12::text[], $13::text[], $14::text[]) AS t(o, s, a, i)
)
SELECT ins.id, {returning} FROM ins"""


async def enqueue_audited(conn: asyncpg.Connection, submissions: Sequence[tuple[Actor, JobCreate]],
                          returning: str) -> dict[str, asyncpg.Record]:
    """Enqueue the jobs of several submitters and audit each one's submission, in one statement
    and one round trip; by id, a row of `returning` (SQL over the inserted row, `ins`) per job.
    For jobs without unique keys (see `enqueue_detailed` for those); refusals as `enqueue`'s."""
    jobs = [job for _, job in submissions]
    for job in jobs:
        if job.unique_key is not None:
            raise ValueError("enqueue_audited takes jobs without a unique_key")
        _check_new_job(job)
    ordered, outside = order_batch(jobs)
    await _check_outside(conn, ordered, outside)
    by_actor: dict[Actor, list[str]] = {}
    for actor, job in submissions:
        by_actor.setdefault(actor, []).append(job.id)
    actors = list(by_actor)
    with _insert_errors(ordered):
        rows = await conn.fetch(_insert_audited_sql(returning), *_insert_args(ordered),
                                [j.scheduled_at for j in ordered], [None] * len(ordered),
                                [a.os_user for a in actors], [a.source for a in actors], [a.name for a in actors],
                                [",".join(by_actor[a]) for a in actors])
    return {r["id"]: r for r in rows}


# -- worker side ----------------------------------------------------------------------------

# How a claim finds its jobs. Runnable jobs are in jobs_ready_idx by type, in claim order: each
# type the worker serves is one short index walk (its own LIMIT keeps it bounded whatever the
# planner thinks of the statistics), the walks are merged in (priority, seq) order, and rows
# are locked one by one by ctid as the merge yields them (SKIP LOCKED), until enough are held.
# Types nobody here serves are never read. Jobs whose run_at has come are taken from
# jobs_waiting_idx by the same statement: those of the worker's types compete in the same
# order, the others are made runnable (run_at cleared) for the workers that serve them. When
# nothing is due, that costs one index entry, however many jobs wait.
#
# The claim is planned once per connection, not once per call. Its parameters reach the plan
# only as scalar subqueries (InitPlans), whose values the planner never sees: a custom plan then
# costs exactly what the generic one does, so after its first five custom plans PostgreSQL's
# plan cache keeps the generic plan, the same merge of index walks. With the values visible
# (the LIMITs, the types' statistics) a custom plan looked cheaper whenever the statistics had
# seen a backlog, and a claim of 20 types spent more time being planned than being run.
_READY = "status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL"
_WAITING = "status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NOT NULL"
UNION_MAX_TYPES = 32  # above this, one lateral walk per type instead of a statement per type count
DUE_BATCH = 1000  # due jobs a claim makes runnable at most; the next claim takes the rest
_TYPES = "(SELECT $2::text[])::text[]"  # the worker's types (the cast: an array, not ANY over a subquery)
_CLAIM_LIMIT = "LIMIT (SELECT $3::int)"  # how many jobs to claim; the limited claims put their room here
_WALK_LIMIT = "LIMIT (SELECT $4::int)"  # how far each type's walk may go


# A worker's claim loops each walk their own lane, a fixed half (or third...) of every type's
# jobs by a hash of the id: two loops of one worker then never meet each other's rows. A claim
# that met a row the other loop had just claimed would follow it to its newest version and lock
# it (PostgreSQL keeps that lock to the end of the transaction, although the row is then
# skipped), and the other loop's completion of that running job would wait for this claim's
# commit. Lanes are for one process's loops; other workers and direct calls walk every row.
Lane = tuple[int, int] | None  # (this lane, how many)


def _lane_filter(lane: Lane) -> str:
    if lane is None:
        return ""
    index, count = lane
    return f" AND (hashtext(id) & 2147483647) % {int(count)} = {int(index)}"


def _candidates(n_types: int, lane: Lane = None) -> str:
    """Runnable jobs of the worker's types ($2) in its lane, best first, each walk at most $4 long."""
    ready = _READY + _lane_filter(lane)
    if n_types <= UNION_MAX_TYPES:
        walks = "\n  UNION ALL\n  ".join(
            f"(SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[{i}]) AND {ready}"
            f" ORDER BY priority DESC, seq {_WALK_LIMIT})" for i in range(1, max(n_types, 1) + 1))
        return f"SELECT * FROM (\n  {walks}\n) walks ORDER BY priority DESC, seq"
    return (f"SELECT c.* FROM unnest({_TYPES}) AS t(type) CROSS JOIN LATERAL ("
            f"SELECT ctid AS tid, priority, seq FROM jobs WHERE jobs.type = t.type AND {ready}"
            f" ORDER BY priority DESC, seq {_WALK_LIMIT}) c ORDER BY c.priority DESC, c.seq")


def _pick(n_types: int, lane: Lane, claim_limit: str) -> str:
    """CTEs `due`, `ready`, `picked` and `promoted`: the ids to claim (`claim_limit` at most), locked."""
    return f"""due AS (
    SELECT id, type, priority, seq FROM jobs
     WHERE {_WAITING} AND run_at <= now()
     ORDER BY run_at LIMIT {DUE_BATCH}
       FOR UPDATE SKIP LOCKED
), ready AS (
    SELECT r.id, c.priority, c.seq
      FROM ({_candidates(n_types, lane)}) c
     CROSS JOIN LATERAL (SELECT id FROM jobs WHERE ctid = c.tid AND {_READY}
                           FOR UPDATE SKIP LOCKED) r
     {claim_limit}
), picked AS (
    SELECT id FROM (SELECT id, priority, seq FROM ready
                    UNION ALL
                    SELECT id, priority, seq FROM due WHERE type = ANY({_TYPES})) p
     ORDER BY priority DESC, seq {claim_limit}
), promoted AS (
    UPDATE jobs SET run_at = NULL
     WHERE id = ANY(ARRAY(SELECT id FROM due EXCEPT SELECT id FROM picked))
    RETURNING id
)"""


_CLAIM_SET = """status = 'in_progress', worker_id = $1, attempts = j.attempts + 1, run_at = NULL,
           started_at = now(), updated_at = now()"""
# Seconds a claimed job waited: from its enqueue, its scheduled time or its retry time, to now (its start).
_WAITED = "extract(epoch FROM now() - GREATEST(j.created_at, j.next_retry_at, j.scheduled_at))::float8 AS waited_s"
_CLAIM_RETURNING = """j.id, j.type, j.input_data, j.user_id, j.pipeline_id, j.retry_count, j.attempts,
              j.priority, j.seq, """ + _WAITED


def _done(ids: str, results: str, attempts: str) -> str:
    """Completes the finished jobs the worker still owns: ids, results (JSON text) and attempts."""
    return f"""
    UPDATE jobs AS j
       SET status = 'completed', result_data = u.result::jsonb, completed_at = now(), updated_at = now(),
           error_message = NULL, error_fingerprint = NULL, next_retry_at = NULL, worker_id = NULL
      FROM unnest({ids}::text[], {results}::text[], {attempts}::int[]) AS u(id, result, attempt)
     WHERE j.id = u.id AND j.worker_id = $1 AND j.attempts = u.attempt
       AND j.status = 'in_progress' AND j.is_active
    RETURNING j.id"""


# Records plain results without claiming (a worker that stops, or results with next jobs).
_COMPLETE = _done("$2", "$3", "$4") + " AS id, false AS claimed"

# The pieces `claim_statement` puts together. The claim alone commits asynchronously: losing a
# claim in a server crash only puts the job back in the queue, where it is claimed again, exactly
# as if the worker had crashed. Every statement that records a result commits durably.
_ASYNC_COMMIT = """async_commit AS (
    SELECT set_config('synchronous_commit', 'off', true) AS setting
)"""
_DONE_CTE = f"done AS ({_done('(SELECT $5::text[])', '(SELECT $6::text[])', '(SELECT $7::int[])')}\n)"
_CLAIM_ALONE = f"""UPDATE jobs AS j
   SET {_CLAIM_SET}
 WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (SELECT setting FROM async_commit) = 'off'
RETURNING true AS claimed, {_CLAIM_RETURNING}"""
_CLAIMED_CTE = f"""claimed AS (
    UPDATE jobs AS j
       SET {_CLAIM_SET}
     WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING {_CLAIM_RETURNING}
)"""
_EXCHANGED = """SELECT false AS claimed, d.id, NULL::varchar AS type, NULL::jsonb AS input_data, NULL::int AS user_id,
       NULL::varchar AS pipeline_id, 0 AS retry_count, 0 AS attempts, 0 AS priority, 0::bigint AS seq,
       0::float8 AS waited_s
  FROM done d
UNION ALL
SELECT true, c.id, c.type, c.input_data, c.user_id, c.pipeline_id, c.retry_count, c.attempts,
       c.priority, c.seq, c.waited_s
  FROM claimed c"""

# A limited type is claimed apart, one statement per type: it locks the type's type_limits row,
# then asks jobdesk_type_room (sql/013) how many it may take; that function counts the jobs in
# progress with a fresh snapshot, after the lock is held, so two claims never both see the same
# free slot. A worker's own cap is kept the same way, under an advisory lock of its own (its two
# pumps claim at once). Types without a limit never come here.
TYPE_LIMIT_LOCK = """lk AS (
    SELECT max_running FROM type_limits WHERE type = ($2::text[])[1] FOR UPDATE
)"""
_ROOM_LIMIT = "LIMIT (SELECT n FROM room)"  # a limited claim takes what room it has, not $3
# The room's arguments beyond the type and its limit: the worker's cap and how many it asks for,
# and for an exchange the jobs it completes (their slots are free at once).
_ROOM_ARGS_CLAIM = "$5::int, $3::int"
_ROOM_ARGS_EXCHANGE = "$8::int, $3::int,\n                             $5::text[], $7::int[]"


def _room(args: str) -> str:
    return f"""room AS MATERIALIZED (
    SELECT jobdesk_type_room($1::varchar, ($2::text[])[1], (SELECT max_running FROM lk), {args}) AS n
)"""


@functools.lru_cache(maxsize=128)
def claim_statement(n_types: int, lane: Lane = None, *, exchange: bool = False, limited: bool = False) -> str:
    """The claim of up to $3 runnable jobs of the worker's $1 types ($2, `n_types` of them), each
    type's walk at most $4 long, in `lane` (None: every row). Parameters beyond those:

    - `exchange`: first completes the jobs the worker finished ($5 ids, $6 results, $7 attempts),
      in the same statement and commit; rows come back with `claimed` false for those.
    - `limited`: the claim of one limited type (`n_types` 1, no lane), under the lock of its
      `type_limits` row and within the room `jobdesk_type_room` gives, including the worker's own
      cap ($5 alone, $8 with `exchange`; NULL for none).
    """
    if limited and (n_types != 1 or lane is not None):
        raise ValueError("a limited claim is of one type, without a lane")
    pick = _pick(n_types, lane, _ROOM_LIMIT if limited else _CLAIM_LIMIT)
    lock = [TYPE_LIMIT_LOCK, _room(_ROOM_ARGS_EXCHANGE if exchange else _ROOM_ARGS_CLAIM)] if limited else []
    if exchange:
        ctes, final = [_DONE_CTE, *lock, pick, _CLAIMED_CTE], _EXCHANGED
    else:
        ctes, final = [*lock, _ASYNC_COMMIT, pick], _CLAIM_ALONE
    return f"\nWITH {', '.join(ctes)}\n{final}\n"


def _done_args(finished: Sequence[tuple[Job, ProcessorResult]]) -> tuple[list[str], list[str], list[int]]:
    """The ids, results (JSON text) and attempts of finished jobs, as `_done` reads them."""
    return ([j.id for j, _ in finished], [json_text(r.result_data) for _, r in finished],
            [j.attempt for j, _ in finished])


def _walk_limit(limit: int) -> int:
    """How far each type's walk may go: past rows that other claims hold (SKIP LOCKED), such as
    the other pump's of the same worker, without reading a whole type's backlog."""
    return 4 * limit + 8


async def claim_limited(conn: asyncpg.Connection, worker_id: str, types: Sequence[str], limit: int,
                        own_caps: Mapping[str, int],
                        finished: Sequence[tuple[Job, ProcessorResult]] = ()) -> tuple[set[str], list[asyncpg.Record]]:
    """Record plain results (with the first type's claim) and claim up to `limit` jobs of
    limited types, within their limits. Returns the ids completed and the rows claimed."""
    rows: list[asyncpg.Record] = []
    written: set[str] = set()
    if finished and types:
        first = types[0]
        out = await conn.fetch(claim_statement(1, exchange=True, limited=True), worker_id, [first], limit,
                               _walk_limit(limit), *_done_args(finished), own_caps.get(first))
        written = {r["id"] for r in out if not r["claimed"]}
        rows = [r for r in out if r["claimed"]]
        types = types[1:]
    for job_type in types:
        left = limit - len(rows)
        if left <= 0:
            break
        rows.extend(await conn.fetch(claim_statement(1, limited=True), worker_id, [job_type], left, _walk_limit(left),
                                     own_caps.get(job_type)))
    return written, rows


def _claimed_jobs(claimed: list[asyncpg.Record]) -> list[Job]:
    if len(claimed) > 1:
        claimed.sort(key=lambda r: (-r["priority"], r["seq"]))
    return [Job(r["id"], r["type"], r["input_data"], r["user_id"], r["pipeline_id"],
                r["retry_count"], r["attempts"], r["priority"], waited_s=r["waited_s"]) for r in claimed]


async def complete_and_claim(conn: asyncpg.Connection, worker_id: str, types: Sequence[str], limit: int,
                             finished: Sequence[tuple[Job, ProcessorResult]] = (),
                             limits: ClaimLimits | None = None, *,
                             free_idle: bool = False, lane: Lane = None) -> tuple[set[str], list[Job]]:
    """Record plain results (no next jobs, no approval) and claim up to `limit` runnable jobs
    of the given types, oldest first, atomically. Returns the ids completed and the jobs claimed.

    A finished job this worker no longer owns (or that was cancelled) is not completed. Types
    `limits` names are claimed within their limits, after the others (see `claim_limited`).
    With `free_idle` (the unlimited types had nothing last time, and nothing new came since),
    only the limited types are claimed: one statement per round instead of two. `lane` keeps
    the claim of unlimited types to that lane's share of the jobs (see `Lane`).
    """
    limited = limits.limited(types) if limits is not None and limit > 0 else []
    if limited and limits is not None:
        free = [] if free_idle else [t for t in types if t not in limited]
        written: set[str] = set()
        jobs: list[Job] = []
        if free or not finished:
            written, jobs = await complete_and_claim(conn, worker_id, free, limit, finished, lane=lane)
            finished = ()
        if len(jobs) < limit or finished:
            done, rows = await claim_limited(conn, worker_id, limited, limit - len(jobs), limits.local, finished)
            written |= done
            more = _claimed_jobs(rows)
            jobs = sorted([*jobs, *more], key=lambda j: -j.priority) if jobs else more
        return written, jobs
    types = list(types)
    if finished and (limit <= 0 or not types):
        rows = await conn.fetch(_COMPLETE, worker_id, *_done_args(finished))
    elif finished:
        rows = await conn.fetch(claim_statement(len(types), lane, exchange=True), worker_id, types, limit,
                                _walk_limit(limit), *_done_args(finished))
    elif limit > 0 and types:
        rows = await conn.fetch(claim_statement(len(types), lane), worker_id, types, limit, _walk_limit(limit))
    else:
        return set(), []
    written = {r["id"] for r in rows if not r["claimed"]}
    return written, _claimed_jobs([r for r in rows if r["claimed"]])


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


def retry_decision(retry_count: int, intervals: Sequence[float], permanent: bool) -> tuple[Status, int, float | None]:
    """The retry rule: N intervals mean N retries.

    After the k-th failure (k <= N) the job is queued again with retry_count = k and waits the
    k-th interval; the (N+1)-th failure, or a permanent error, makes it failed.
    """
    if permanent or retry_count >= len(intervals):
        return Status.FAILED, retry_count, None
    return Status.QUEUED, retry_count + 1, float(intervals[retry_count])


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
     WHERE id = $1 AND worker_id = $2 AND attempts = $3 AND status = 'in_progress'
    RETURNING id, type, started_at
)
INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, outcome, error_message, error_fingerprint,
                          job_type)
SELECT id, $3, $2, started_at, 'cancelled', 'cancelled while running', $4, type FROM upd
RETURNING job_id
"""


async def mark_cancelled(conn: asyncpg.Connection, worker_id: str, job: Job) -> bool:
    """Record that a running job stopped because an operator cancelled it; cascade downstream."""
    async with conn.transaction():
        row = await conn.fetchrow(_MARK_CANCELLED, job.id, worker_id, job.attempt,
                                  fingerprint("cancelled while running"))
        if row:
            await _cancel_downstream(conn, [job.id])
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
     WHERE j.id = v.id
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
            await _cancel_downstream(conn, cancelled)
    return rows


async def inactive_among(conn: asyncpg.Connection, job_ids: Sequence[str]) -> list[str]:
    """Which of these jobs an operator has cancelled (for a worker that missed the NOTIFY)."""
    rows = await conn.fetch("SELECT id FROM jobs WHERE id = ANY($1::text[]) AND NOT is_active", list(job_ids))
    return [r["id"] for r in rows]


# -- operator actions -----------------------------------------------------------------------

async def _lock_and_check(conn: asyncpg.Connection, action: str, job_ids: Sequence[str]) -> list[asyncpg.Record]:
    ids = list(dict.fromkeys(job_ids))
    if not ids:
        raise JobNotFound("no job given")
    rows = await conn.fetch("SELECT id, status, pending_next_jobs, result_data FROM jobs "
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


_UPSTREAM_CANCELLED = "cancelled: an upstream job was cancelled"
_DOWNSTREAM = """
WITH RECURSIVE down(id) AS (
    SELECT job_id FROM job_dependencies WHERE depends_on_id = ANY($1::text[])
    UNION
    SELECT e.job_id FROM job_dependencies e JOIN down ON e.depends_on_id = down.id
)
UPDATE jobs SET status = 'cancelled', is_active = false, updated_at = now(),
                error_message = $2, error_fingerprint = $3
 WHERE id IN (SELECT id FROM down) AND status IN ('queued', 'waiting_approval')
RETURNING id
"""


async def _cancel_downstream(conn: asyncpg.Connection, job_ids: Sequence[str]) -> list[str]:
    return [r["id"] for r in await conn.fetch(_DOWNSTREAM, list(job_ids), _UPSTREAM_CANCELLED,
                                              fingerprint(_UPSTREAM_CANCELLED))]


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
        cascaded = await _cancel_downstream(conn, idle) if idle else []
        await _audit(conn, actor, "cancel", [r["id"] for r in rows], reason)
    return [*idle, *running, *cascaded]


async def retry(conn: asyncpg.Connection, job_ids: Sequence[str], actor: Actor, *,
                reason: str | None = None) -> list[str]:
    """Put failed or cancelled jobs back to `queued` with a fresh retry budget; history stays."""
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
        await _audit(conn, actor, "retry", ids, reason)
    return ids


# -- bulk actions on a filter -------------------------------------------------------------------

BULK_ACTIONS = ("retry", "cancel")
BULK_CHUNK = 1000  # jobs per transaction (and per audit row) of a bulk action


@dataclass(frozen=True)
class BulkChunk:
    """What one chunk of a bulk action did."""

    picked: list[str]  # the matching jobs it acted on
    changed: list[str]  # every job it changed (for cancel, dependants too)
    next_seq: int | None  # where the next chunk starts (after this seq), None when done


def bulk_filter(action: str, filt: JobFilter) -> JobFilter | None:
    """The filter narrowed to the statuses `action` is legal from; None if none is left."""
    if action not in BULK_ACTIONS:
        raise InvalidJob(f"bulk {action} is not possible; bulk actions are {', '.join(BULK_ACTIONS)}")
    legal = LEGAL_FROM[action] & filt.statuses if filt.statuses else LEGAL_FROM[action]
    return replace(filt, statuses=frozenset(legal)) if legal else None


async def bulk_chunk(conn: asyncpg.Connection, action: str, filt: JobFilter, actor: Actor, *,
                     after_seq: int = 0, upto_seq: int | None = None, limit: int = BULK_CHUNK) -> BulkChunk:
    """Retry or cancel the next `limit` jobs matching `filt` after `after_seq`, in one transaction
    with one audit row.

    Jobs are taken in enqueue order (keyset on `seq`), so a run of chunks meets every job once
    however the table changes meanwhile, and only those the action is legal for; `upto_seq`
    leaves out jobs enqueued after the run began.
    """
    if not 1 <= limit <= BULK_CHUNK:
        raise InvalidJob(f"a bulk chunk holds 1 to {BULK_CHUNK} jobs, not {limit}")
    narrowed = bulk_filter(action, filt)
    if narrowed is None:
        return BulkChunk([], [], None)
    params: list[Any] = [after_seq]
    where = narrowed.where(params)
    if upto_seq is not None:
        params.append(upto_seq)
        where += f" AND seq <= ${len(params)}"
    params.append(limit)
    async with conn.transaction():
        # FOR UPDATE re-checks the filter on rows that changed meanwhile, so only legal ones come back.
        rows = await conn.fetch(f"SELECT id, seq FROM jobs WHERE seq > $1 AND {where} "
                                f"ORDER BY seq LIMIT ${len(params)} FOR UPDATE", *params)
        if not rows:
            return BulkChunk([], [], None)
        picked = [r["id"] for r in rows]
        note = f"bulk: {filt.describe()}"
        changed = await (retry if action == "retry" else cancel)(conn, picked, actor, reason=note)
    return BulkChunk(picked, changed, rows[-1]["seq"] if len(rows) == limit else None)


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
        rows = await conn.fetch("SELECT id FROM jobs WHERE pipeline_id = $1 AND is_active "
                                "AND status IN ('queued', 'waiting_approval', 'in_progress') "
                                "ORDER BY id FOR UPDATE", pipeline_id)
        if not rows:
            exists = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM jobs WHERE pipeline_id = $1)", pipeline_id)
            if not exists:
                raise JobNotFound(f"no pipeline with id {pipeline_id}")
            raise IllegalTransition(f"pipeline {pipeline_id} has no unfinished job to cancel")
        return await cancel(conn, [r["id"] for r in rows], actor)


async def approve(conn: asyncpg.Connection, job_ids: Sequence[str], actor: Actor) -> list[str]:
    """Complete jobs held for approval, release their dependants and create their next jobs."""
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
        await _audit(conn, actor, "approve", ids)
    return ids


async def reject(conn: asyncpg.Connection, job_ids: Sequence[str], reason: str, actor: Actor) -> list[str]:
    """Fail jobs held for approval, with the reason as their error."""
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
        await _audit(conn, actor, "reject", ids, reason.strip())
    return ids


def format_exception(exc: BaseException) -> tuple[str, str]:
    """The one-line error and the full traceback of a processor's exception."""
    first = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return first, "".join(tb_module.format_exception(exc))

