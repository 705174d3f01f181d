"""The SQL of durable processors: steps stored and loaded, suspensions, events emitted and taken,
child jobs spawned, and what a suspended job waits for (sql/021_durable.sql).

A suspension is a change of a job's status, so it goes through `jobdesk_suspend`, a function of
the schema, fenced by worker and attempt like every other worker write (store/transitions).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from jobdesk.core.durable import Wait
from jobdesk.core.errors import JobNotFound
from jobdesk.core.json_value import JsonValue
from jobdesk.core.models import Job, JobCreate, JobRecord
from jobdesk.store.jobs import fetch_records
from jobdesk.store.transitions.inserts import enqueue

_LOAD = "SELECT job_id, name, result FROM job_steps WHERE job_id = ANY($1::varchar[])"

# A step's result, kept only while the worker still owns the job (a worker that lost it to the
# lease rescue stores nothing); the first result stored for a name stays. A checkpoint ("@...",
# a name processors cannot use), stored when its wait suspended the job, is overwritten when the
# wait times out, so that later runs find it timed out too.
_SAVE = """
INSERT INTO job_steps (job_id, name, result, attempt, started_at)
SELECT $1::varchar, $2, $3::text::jsonb, $4, $5
 WHERE EXISTS (SELECT 1 FROM jobs WHERE id = $1::varchar AND worker_id = $6 AND attempts = $4
                 AND status = 'in_progress')
ON CONFLICT (job_id, name) DO UPDATE SET result = EXCLUDED.result, attempt = EXCLUDED.attempt,
                                         finished_at = now()
 WHERE job_steps.name LIKE '@%'
"""

_TAKE_EVENT = """
WITH ev AS (
    SELECT payload FROM job_events WHERE key = $3 ORDER BY id LIMIT 1
), saved AS (
    INSERT INTO job_steps (job_id, name, result, attempt, started_at)
    SELECT $1::varchar, $2, jsonb_build_object('key', $3::text, 'payload', ev.payload), $4, $5 FROM ev
    ON CONFLICT (job_id, name) DO UPDATE SET result = EXCLUDED.result, finished_at = now()
)
SELECT payload FROM ev
"""

_SUSPEND = "SELECT jobdesk_suspend($1, $2, $3, $4, $5, $6, $7, $8, $9::text::jsonb, $10)"

# The first emit of a key wins; a later one inserts nothing (and wakes nobody new).
_EMIT = """
INSERT INTO job_events (key, payload)
SELECT $1::text, $2::text::jsonb WHERE NOT EXISTS (SELECT 1 FROM job_events WHERE key = $1::text)
RETURNING id
"""

# A step's duration in seconds, to the millisecond: the detail and the API document both read it so.
STEP_DURATION = "round(extract(epoch FROM {s}.finished_at - {s}.started_at)::numeric, 3)::float8"
STEP_ORDER = "{s}.finished_at, {s}.name"
STEP_KEYS = ("name", "result", "attempt", "started_at", "finished_at", "duration_s")

_STEPS = f"""
SELECT s.name, s.result, s.attempt, s.started_at, s.finished_at, {STEP_DURATION.format(s='s')} AS duration_s
  FROM job_steps s WHERE s.job_id = $1 ORDER BY {STEP_ORDER.format(s='s')}
"""

_WAIT = """
SELECT w.kind, w.event_key, w.child_ids, w.until,
       (SELECT count(*) FROM jobs c WHERE c.id = ANY (w.child_ids)
          AND c.status NOT IN ('completed', 'failed', 'cancelled'))::int AS children_pending
  FROM job_waits w JOIN jobs j ON j.id = w.job_id
 WHERE w.job_id = $1 AND j.status = 'queued' AND j.attempts = w.attempt AND j.run_at IS NOT NULL
"""

INFINITY = datetime.max.replace(tzinfo=UTC)  # timestamptz 'infinity', as asyncpg writes it


@dataclass(frozen=True)
class StepRow:
    """One stored step, as the detail pane, `jobdesk show` and the API list them."""

    name: str
    result: JsonValue
    attempt: int
    started_at: datetime
    finished_at: datetime
    duration_s: float

    def to_json(self) -> dict[str, JsonValue]:
        """As the API answers it (`STEP_KEYS`), timestamps in UTC."""
        return {"name": self.name, "result": self.result, "attempt": self.attempt,
                "started_at": self.started_at.astimezone(UTC).isoformat(),
                "finished_at": self.finished_at.astimezone(UTC).isoformat(), "duration_s": self.duration_s}


@dataclass(frozen=True)
class WaitRow:
    """What a suspended job waits for now."""

    kind: str
    until: datetime | None  # None: no timeout
    event_key: str | None
    child_ids: list[str]
    children_pending: int


async def load_steps(conn: asyncpg.Connection, job_ids: Sequence[str]) -> dict[str, dict[str, JsonValue]]:
    """The stored steps of these jobs, by job id (a job with none is left out), in one read."""
    steps: dict[str, dict[str, JsonValue]] = {}
    for r in await conn.fetch(_LOAD, list(job_ids)):
        steps.setdefault(r["job_id"], {})[r["name"]] = r["result"]
    return steps


async def save_step(conn: asyncpg.Connection, worker_id: str, job: Job, name: str, result_json: str,
                    started: datetime) -> None:
    await conn.execute(_SAVE, job.id, name, result_json, job.attempt, started, worker_id)


async def take_event(conn: asyncpg.Connection, job: Job, name: str, key: str,
                     started: datetime) -> tuple[bool, JsonValue]:
    rows = await conn.fetch(_TAKE_EVENT, job.id, name, key, job.attempt, started)
    return (True, rows[0]["payload"]) if rows else (False, None)


async def suspend(conn: asyncpg.Connection, worker_id: str, job: Job, wait: Wait) -> str | None:
    """Put a running job back in the queue until its wait is over. 'suspended', 'ready' (what it
    waits for was there already: it runs again at once), or None if the worker no longer owns it."""
    result: str | None = await conn.fetchval(
        _SUSPEND, job.id, worker_id, job.attempt, wait.kind, wait.until or INFINITY, wait.event_key,
        list(wait.child_ids) or None, wait.step_name, json.dumps(wait.step_result), wait.step_started)
    return result


async def emit_event(conn: asyncpg.Connection, key: str, payload: JsonValue) -> bool:
    """Emit an event: every job waiting on `key` wakes. True if this was the key's first emit."""
    return await conn.fetchval(_EMIT, key, json.dumps(payload)) is not None


async def records(conn: asyncpg.Connection, ids: Sequence[str]) -> list[JobRecord]:
    """The jobs of these ids, in the order given; JobNotFound names the first unknown one."""
    by_id = await fetch_records(conn, ids)
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise JobNotFound(f"no job {missing[0]}")
    return [by_id[i] for i in ids]


async def spawn(conn: asyncpg.Connection, worker_id: str, parent: Job, children: Sequence[JobCreate],
                name: str, started: datetime) -> list[str]:
    """Create a running job's child jobs and store their ids as step `name`, in one transaction,
    so a rerun never creates them twice. They join the parent's pipeline; a parent without one
    starts a pipeline of its own id, so the children are drawn under it."""
    pipeline = parent.pipeline_id or parent.id
    for child in children:
        if child.user_id is None:
            child.user_id = parent.user_id
        if child.pipeline_id is None:
            child.pipeline_id = pipeline
        if child.trace_context is None:  # untraced here: the trace the parent was enqueued in goes on
            child.trace_context = parent.trace_context
    async with conn.transaction():
        owned = await conn.fetchval(
            "UPDATE jobs SET pipeline_id = COALESCE(pipeline_id, id) WHERE id = $1 AND worker_id = $2"
            " AND attempts = $3 AND status = 'in_progress' RETURNING pipeline_id", parent.id, worker_id, parent.attempt)
        if owned is None:
            raise JobNotFound(f"job {parent.id} is no longer run by this worker; nothing was spawned")
        ids = await enqueue(conn, children) if children else []
        if ids:
            await conn.execute("UPDATE jobs SET spawned_by = $1 WHERE id = ANY($2::text[]) AND spawned_by IS NULL",
                               parent.id, ids)
        await conn.execute(_SAVE, parent.id, name, json.dumps({"ids": ids}), parent.attempt, started, worker_id)
    parent.pipeline_id = pipeline
    return ids


async def steps_of(conn: asyncpg.Connection, job_id: str) -> list[StepRow]:
    return [StepRow(r["name"], r["result"], r["attempt"], r["started_at"], r["finished_at"], r["duration_s"])
            for r in await conn.fetch(_STEPS, job_id)]


async def wait_of(conn: asyncpg.Connection, job_id: str) -> WaitRow | None:
    """What a suspended job waits for, or None if it is not suspended now."""
    row = await conn.fetchrow(_WAIT, job_id)
    if row is None:
        return None
    until = row["until"]
    return WaitRow(row["kind"], None if until is None or until.year >= 9999 else until, row["event_key"],
                   list(row["child_ids"] or []), row["children_pending"])


async def clear_steps(conn: asyncpg.Connection, job_ids: Sequence[str]) -> None:
    """Forget the steps of these jobs (a retry from scratch)."""
    await conn.execute("DELETE FROM job_steps WHERE job_id = ANY($1::text[])", list(job_ids))
    await conn.execute("DELETE FROM job_waits WHERE job_id = ANY($1::text[])", list(job_ids))
