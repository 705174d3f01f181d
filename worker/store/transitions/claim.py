"""The claim: the statement that takes runnable jobs for a worker (alone, or with the completion of
the jobs it finished), composed from named fragments by `claim_statement`, and the calls that run it.

This is the engine's hot path: each statement is kept byte for byte in tests/store/golden.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import asyncpg

from jobdesk.core.limits import ClaimLimits
from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.validation import json_text
from jobdesk.store.transitions.floors import WalkFloors

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
# The claim reads `jobs` with the status spelled out, which the planner prunes to `jobs_live`, and
# changes `jobs_live` itself: rows it claims stay there (sql/041), and no other partition's plan
# is made or locked.
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


# Jobs made runnable for other workers (their run_at came) are below those workers' walk floors
# (see WalkFloors): they are told, as of every other way a job becomes runnable. The final
# statement reads `told`, so that it runs (a CTE nobody reads is not).
_TOLD = """told AS (
    SELECT count(pg_notify('jobdesk_new_jobs', '')) AS n FROM (SELECT FROM promoted LIMIT 1) p
)"""
_TOLD_READ = "(SELECT n FROM told) >= 0"


def _walk(ready: str, of_type: str, floor: tuple[str, str] | None) -> str:
    """One type's walk of its runnable jobs, best first, at most $4 long; with a `floor` (the
    priority and seq it starts from, as SQL), two: the rest of the floor's priority from its seq
    on, and every lower priority. Each is an index range, so the walk starts past the entries of
    jobs already claimed instead of stepping over them (see WalkFloors)."""
    walk = f"SELECT ctid AS tid, priority, seq FROM jobs WHERE {of_type} AND {ready}"
    order = f" ORDER BY priority DESC, seq {_WALK_LIMIT}"
    if floor is None:
        return f"({walk}{order})"
    priority, seq = floor
    return (f"({walk} AND priority = {priority} AND seq >= {seq}{order})\n  UNION ALL\n  "
            f"({walk} AND priority < {priority}{order})")


def _candidates(n_types: int, lane: Lane = None, floors: tuple[str, str] | None = None) -> str:
    """Runnable jobs of the worker's types ($2) in its lane, best first, each walk at most $4
    long; with `floors` (the parameters of the floors' priorities and seqs, by type), each walk
    starts at its type's floor."""
    ready = _READY + _lane_filter(lane)
    if n_types <= UNION_MAX_TYPES:
        walks = "\n  UNION ALL\n  ".join(
            _walk(ready, f"type = (SELECT ($2::text[])[{i}])",
                  None if floors is None else (f"(SELECT ({floors[0]}::int[])[{i}])",
                                               f"(SELECT ({floors[1]}::bigint[])[{i}])"))
            for i in range(1, max(n_types, 1) + 1))
        return f"SELECT * FROM (\n  {walks}\n) walks ORDER BY priority DESC, seq"
    if floors is None:
        return (f"SELECT c.* FROM unnest({_TYPES}) AS t(type) CROSS JOIN LATERAL "
                f"{_walk(ready, 'jobs.type = t.type', None)} c ORDER BY c.priority DESC, c.seq")
    walk = _walk(ready, "jobs.type = t.type", ("t.floor_priority", "t.floor_seq"))
    return (f"SELECT c.* FROM unnest({_TYPES}, (SELECT {floors[0]}::int[]), (SELECT {floors[1]}::bigint[]))"
            f" AS t(type, floor_priority, floor_seq) CROSS JOIN LATERAL (\n  {walk}\n) c"
            " ORDER BY c.priority DESC, c.seq")


def _pick(n_types: int, lane: Lane, claim_limit: str, floors: tuple[str, str] | None = None) -> str:
    """CTEs `due`, `ready`, `picked`, `promoted` and `told`: the ids to claim (`claim_limit` at
    most), locked."""
    return f"""due AS (
    SELECT id, type, priority, seq FROM jobs
     WHERE {_WAITING} AND run_at <= now()
     ORDER BY run_at LIMIT {DUE_BATCH}
       FOR UPDATE SKIP LOCKED
), ready AS (
    SELECT r.id, c.priority, c.seq
      FROM ({_candidates(n_types, lane, floors)}) c
     CROSS JOIN LATERAL (SELECT id FROM jobs WHERE ctid = c.tid AND {_READY}
                           FOR UPDATE SKIP LOCKED) r
     {claim_limit}
), picked AS (
    SELECT id FROM (SELECT id, priority, seq FROM ready
                    UNION ALL
                    SELECT id, priority, seq FROM due WHERE type = ANY({_TYPES})) p
     ORDER BY priority DESC, seq {claim_limit}
), promoted AS (
    UPDATE jobs_live SET run_at = NULL
     WHERE id = ANY(ARRAY(SELECT id FROM due EXCEPT SELECT id FROM picked))
    RETURNING id
), {_TOLD}"""


_CLAIM_SET = """status = 'in_progress', worker_id = $1, attempts = j.attempts + 1, run_at = NULL,
           started_at = now(), updated_at = now()"""
# Seconds a claimed job waited: from its enqueue, its scheduled time or its retry time, to now (its start).
_WAITED = "extract(epoch FROM now() - GREATEST(j.created_at, j.next_retry_at, j.scheduled_at))::float8 AS waited_s"
_CLAIM_RETURNING = """j.id, j.type, j.input_data, j.user_id, j.pipeline_id, j.retry_count, j.attempts,
              j.priority, j.seq, j.trace_context, """ + _WAITED


def _done(ids: str, results: str, attempts: str) -> str:
    """Completes the finished jobs the worker still owns: ids, results (JSON text) and attempts."""
    return f"""
    UPDATE jobs AS j
       SET status = 'completed', result_data = u.result::jsonb, completed_at = now(), updated_at = now(),
           error_message = NULL, error_fingerprint = NULL, next_retry_at = NULL, worker_id = NULL,
           retain_from = now()
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
_CLAIM_ALONE = f"""UPDATE jobs_live AS j
   SET {_CLAIM_SET}
 WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (SELECT setting FROM async_commit) = 'off'
   AND {_TOLD_READ}
RETURNING true AS claimed, {_CLAIM_RETURNING}"""
_CLAIMED_CTE = f"""claimed AS (
    UPDATE jobs_live AS j
       SET {_CLAIM_SET}
     WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND {_TOLD_READ}
    RETURNING {_CLAIM_RETURNING}
)"""
_EXCHANGED = """SELECT false AS claimed, d.id, NULL::varchar AS type, NULL::jsonb AS input_data, NULL::int AS user_id,
       NULL::varchar AS pipeline_id, 0 AS retry_count, 0 AS attempts, 0 AS priority, 0::bigint AS seq,
       NULL::jsonb AS trace_context, 0::float8 AS waited_s
  FROM done d
UNION ALL
SELECT true, c.id, c.type, c.input_data, c.user_id, c.pipeline_id, c.retry_count, c.attempts,
       c.priority, c.seq, c.trace_context, c.waited_s
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
def claim_statement(n_types: int, lane: Lane = None, *, exchange: bool = False, limited: bool = False,
                    floors: bool = False) -> str:
    """The claim of up to $3 runnable jobs of the worker's $1 types ($2, `n_types` of them), each
    type's walk at most $4 long, in `lane` (None: every row). Parameters beyond those:

    - `exchange`: first completes the jobs the worker finished ($5 ids, $6 results, $7 attempts),
      in the same statement and commit; rows come back with `claimed` false for those.
    - `limited`: the claim of one limited type (`n_types` 1, no lane), under the lock of its
      `type_limits` row and within the room `jobdesk_type_room` gives, including the worker's own
      cap ($5 alone, $8 with `exchange`; NULL for none).
    - `floors`: each type's walk starts at its floor (see WalkFloors), the priorities and seqs
      by type in the last two parameters ($5 and $6 alone, $8 and $9 with `exchange`).
    """
    if limited and (n_types != 1 or lane is not None or floors):
        raise ValueError("a limited claim is of one type, without a lane or floors")
    at = (("$8", "$9") if exchange else ("$5", "$6")) if floors else None
    pick = _pick(n_types, lane, _ROOM_LIMIT if limited else _CLAIM_LIMIT, at)
    lock = [TYPE_LIMIT_LOCK, _room(_ROOM_ARGS_EXCHANGE if exchange else _ROOM_ARGS_CLAIM)] if limited else []
    if exchange:
        ctes, final = [_DONE_CTE, *lock, pick, _CLAIMED_CTE], _EXCHANGED
    else:
        ctes, final = [*lock, _ASYNC_COMMIT, pick], _CLAIM_ALONE
    return f"\nWITH {', '.join(ctes)}\n{final}\n"


# A flow-controlled type (a row in flow_limits: a rate, limits per user, fair share) is claimed
# apart too, one statement per type: jobdesk_flow_pick (sql/022) locks the type's flow_limits
# row (and its type_limits row), and returns the ids it may start, locked, with their starts
# logged; this statement starts them. Due jobs are made runnable for the next claim. A last row
# without an id (`claimed` false) tells the worker how long the type is held back: seconds until
# its rate allows as many starts as were asked for, or infinity while its limits leave no room.
# A type that takes its turns only then, in one claim, costs a busy worker a statement per
# batch of starts, not one per start as each old start leaves the window.
_FLOW_PICK = """pick AS MATERIALIZED (
    SELECT * FROM jobdesk_flow_pick($1::varchar, ($2::text[])[1], $3::int, {own}::int{done})
)"""
_FLOW_PROMOTE = f"""promoted AS (
    UPDATE jobs_live SET run_at = NULL
     WHERE id = ANY(ARRAY(SELECT id FROM jobs WHERE {_WAITING} AND run_at <= now()
                           ORDER BY run_at LIMIT {DUE_BATCH} FOR UPDATE SKIP LOCKED))
       AND NOT id = ANY((SELECT ids FROM pick)::text[])
    RETURNING id
), {_TOLD}"""
_FLOW_CLAIMED = f"""claimed AS (
    UPDATE jobs_live AS j
       SET {_CLAIM_SET}
     WHERE j.id = ANY((SELECT ids FROM pick)::text[]) AND {_TOLD_READ}{{commit}}
    RETURNING {_CLAIM_RETURNING}
)"""
_FLOW_HELD = """
UNION ALL
SELECT false, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, NULL,
       GREATEST(extract(epoch FROM p.next_at - now()), 0)::float8
  FROM pick p WHERE p.next_at IS NOT NULL"""


@functools.lru_cache(maxsize=4)
def flow_claim_statement(*, exchange: bool = False) -> str:
    """The claim of up to $3 jobs of one flow-controlled type ($2, one type) for worker $1, with
    the worker's own cap of the type ($4; NULL for none). With `exchange`, it first completes
    the finished jobs ($5 ids, $6 results, $7 attempts)."""
    pick = _FLOW_PICK.format(own="$4", done=", $5::text[], $7::int[]" if exchange else "")
    if exchange:
        ctes = [_DONE_CTE, pick, _FLOW_PROMOTE, _FLOW_CLAIMED.format(commit="")]
        final = _EXCHANGED
    else:
        ctes = [_ASYNC_COMMIT, pick, _FLOW_PROMOTE,
                _FLOW_CLAIMED.format(commit="\n       AND (SELECT setting FROM async_commit) = 'off'")]
        final = _EXCHANGED.split("UNION ALL\n", 1)[1].replace("SELECT true,", "SELECT true AS claimed,", 1)
    return f"\nWITH {', '.join(ctes)}\n{final}{_FLOW_HELD}\n"


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
                        finished: Sequence[tuple[Job, ProcessorResult]] = (), *,
                        flow: frozenset[str] = frozenset(),
                        held: dict[str, float] | None = None) -> tuple[set[str], list[asyncpg.Record]]:
    """Record plain results (with the first type's claim) and claim up to `limit` jobs of
    limited types, within their limits. Returns the ids completed and the rows claimed. Types
    in `flow` are flow-controlled; those held back are put in `held`, with the seconds until
    their next start is allowed (infinity: until a job ends)."""
    rows: list[asyncpg.Record] = []
    written: set[str] = set()
    for job_type in types:
        left = limit - len(rows)
        if left <= 0 and not finished:
            break
        done = _done_args(finished) if finished else ()
        if job_type in flow:
            statement = flow_claim_statement(exchange=bool(finished))
            args = [worker_id, [job_type], left, own_caps.get(job_type), *done]
        else:
            statement = claim_statement(1, exchange=bool(finished), limited=True)
            args = [worker_id, [job_type], left, _walk_limit(left), *done, own_caps.get(job_type)]
        finished = ()
        out = await conn.fetch(statement, *args)
        for r in out:
            if r["claimed"]:
                rows.append(r)
            elif r["id"] is not None:
                written.add(r["id"])
            elif held is not None:
                held[job_type] = r["waited_s"]
    return written, rows


def _claimed_jobs(claimed: list[asyncpg.Record]) -> list[Job]:
    if len(claimed) > 1:
        claimed.sort(key=lambda r: (-r["priority"], r["seq"]))
    return [Job(r["id"], r["type"], r["input_data"], r["user_id"], r["pipeline_id"],
                r["retry_count"], r["attempts"], r["priority"], waited_s=r["waited_s"],
                trace_context=r["trace_context"]) for r in claimed]


async def complete_and_claim(conn: asyncpg.Connection, worker_id: str, types: Sequence[str], limit: int,
                             finished: Sequence[tuple[Job, ProcessorResult]] = (),
                             limits: ClaimLimits | None = None, *,
                             free_idle: bool = False, lane: Lane = None,
                             held: dict[str, float] | None = None,
                             floors: WalkFloors | None = None) -> tuple[set[str], list[Job]]:
    """Record plain results (no next jobs, no approval) and claim up to `limit` runnable jobs
    of the given types, oldest first, atomically. Returns the ids completed and the jobs claimed.

    A finished job this worker no longer owns (or that was cancelled) is not completed. Types
    `limits` names are claimed within their limits, after the others (see `claim_limited`).
    With `free_idle` (the unlimited types had nothing last time, and nothing new came since),
    only the limited types are claimed: one statement per round instead of two. `lane` keeps
    the claim of unlimited types to that lane's share of the jobs (see `Lane`). Flow-controlled
    types that are held back are put in `held` (see `claim_limited`).
    """
    limited = limits.limited(types) if limits is not None and limit > 0 else []
    if limited and limits is not None:
        free = [] if free_idle else [t for t in types if t not in limited]
        written: set[str] = set()
        jobs: list[Job] = []
        if free or not finished:
            written, jobs = await complete_and_claim(conn, worker_id, free, limit, finished, lane=lane, floors=floors)
            finished = ()
        if len(jobs) < limit or finished:
            done, rows = await claim_limited(conn, worker_id, limited, limit - len(jobs), limits.local, finished,
                                             flow=limits.flow, held=held)
            written |= done
            more = _claimed_jobs(rows)
            jobs = sorted([*jobs, *more], key=lambda j: -j.priority) if jobs else more
        return written, jobs
    types = list(types)
    at = list(floors.args(types)) if floors is not None else []
    if finished and (limit <= 0 or not types):
        rows = await conn.fetch(_COMPLETE, worker_id, *_done_args(finished))
    elif finished:
        rows = await conn.fetch(claim_statement(len(types), lane, exchange=True, floors=floors is not None),
                                worker_id, types, limit, _walk_limit(limit), *_done_args(finished), *at)
    elif limit > 0 and types:
        rows = await conn.fetch(claim_statement(len(types), lane, floors=floors is not None),
                                worker_id, types, limit, _walk_limit(limit), *at)
    else:
        return set(), []
    written = {r["id"] for r in rows if not r["claimed"]}
    claimed = [r for r in rows if r["claimed"]]
    if floors is not None and claimed:
        floors.advance(claimed)
    return written, _claimed_jobs(claimed)
