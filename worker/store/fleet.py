"""The `workers` table: registration, heartbeats and the control channel.

Each worker registers a row at start and heartbeats it. An operator (CLI or console) controls a
worker on any host by setting `requested` on its row and sending a NOTIFY; the worker acts at
once on the NOTIFY, or at its next heartbeat if the NOTIFY was missed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from jobdesk.core.errors import IllegalTransition, JobNotFound
from jobdesk.core.json_value import JsonObject
from jobdesk.core.rules import WORKER_COMMANDS_LEGAL_FROM, worker_command_is_legal
from jobdesk.store.jobs import COUNT_CAP
from jobdesk.store.transitions import CONTROL_CHANNEL

LIVE_STATES = ("running", "paused", "draining")
COMMANDS = tuple(WORKER_COMMANDS_LEGAL_FROM)


def is_lost(state: str, heartbeat_age_s: float, lease_timeout_s: float) -> bool:
    """Whether to treat a worker as lost: declared lost by another worker, or in a live state
    with a heartbeat older than the lease (nobody may be running to declare it)."""
    return state == "lost" or (state in LIVE_STATES and heartbeat_age_s > lease_timeout_s)


@dataclass
class WorkerRecord:
    """A row of `workers`, plus the jobs it is running."""

    id: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    concurrency: int
    job_types: list[str]
    version: str
    state: str
    requested: str | None
    stopped_at: datetime | None
    heartbeat_age_s: float
    running_jobs: list[str]

    def is_lost(self, lease_timeout_s: float) -> bool:
        return is_lost(self.state, self.heartbeat_age_s, lease_timeout_s)

    def to_json(self) -> JsonObject:
        out = dict(self.__dict__)
        for key in ("started_at", "heartbeat_at", "stopped_at"):
            out[key] = out[key].isoformat() if out[key] else None
        return out


@dataclass
class UnservedType:
    """A job type with queued jobs that no live worker serves."""

    type: str
    queued: int  # queued jobs of this type, counted up to the cap
    capped: bool  # counting stopped at the cap: there may be more


async def register(conn: asyncpg.Connection, worker_id: str, host: str, pid: int, concurrency: int,
                   job_types: Sequence[str], version: str) -> None:
    await conn.execute("""
        INSERT INTO workers (id, host, pid, concurrency, job_types, version)
        VALUES ($1, $2, $3, $4, $5::text[], $6)
        ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), state = 'running', stopped_at = NULL""",
        worker_id, host, pid, concurrency, list(job_types), version)


async def heartbeat(conn: asyncpg.Connection, worker_id: str, state: str) -> tuple[str | None, bool]:
    """Record that the worker is alive in `state`; return any pending request and whether the
    worker had been declared lost meanwhile (its jobs were then taken back)."""
    row = await conn.fetchrow("""
        WITH old AS (SELECT state FROM workers WHERE id = $1)
        UPDATE workers SET heartbeat_at = now(), state = $2::varchar WHERE id = $1
        RETURNING requested, (SELECT state FROM old) = 'lost' AS was_lost""", worker_id, state)
    if row is None:
        return None, True
    return row["requested"], bool(row["was_lost"])


async def renew_lease(conn: asyncpg.Connection, worker_id: str) -> bool:
    """Keep a live worker's lease (its heartbeat time) and nothing else: its state, requests
    and a `lost` or `stopped` row are left as they are. False if the row is no longer live."""
    return await conn.fetchval("""
        UPDATE workers SET heartbeat_at = now()
         WHERE id = $1 AND state IN ('running', 'paused', 'draining') RETURNING true""", worker_id) is True


async def take_request(conn: asyncpg.Connection, worker_id: str) -> str | None:
    return await conn.fetchval("""
        UPDATE workers w SET requested = NULL FROM (SELECT requested FROM workers WHERE id = $1 FOR UPDATE) old
         WHERE w.id = $1 RETURNING old.requested""", worker_id)


async def set_state(conn: asyncpg.Connection, worker_id: str, state: str) -> None:
    await conn.execute("UPDATE workers SET state = $2::varchar, heartbeat_at = now(), "
                       "stopped_at = CASE WHEN $2::varchar = 'stopped' THEN now() END WHERE id = $1",
                       worker_id, state)


async def mark_stale_workers_lost(conn: asyncpg.Connection, lease_s: float, me: str) -> list[asyncpg.Record]:
    """Declare lost every live worker whose heartbeat is older than the lease; return them."""
    return await conn.fetch("""
        UPDATE workers SET state = 'lost'
         WHERE state IN ('running', 'paused', 'draining') AND id <> $2
           AND heartbeat_at < now() - make_interval(secs => $1)
        RETURNING id, host, pid, heartbeat_at""", lease_s, me)


async def live_served_types(conn: asyncpg.Connection, lease_timeout_s: float) -> list[frozenset[str]]:
    """The job types of each live worker (running, paused or draining, its lease held)."""
    rows = await conn.fetch("""
        SELECT job_types FROM workers
         WHERE state = ANY($1::text[]) AND heartbeat_at >= now() - make_interval(secs => $2)""",
        list(LIVE_STATES), lease_timeout_s)
    return [frozenset(r["job_types"]) for r in rows]


async def list_workers(conn: asyncpg.Connection, *, include_stopped: bool = True) -> list[WorkerRecord]:
    rows = await conn.fetch("""
        SELECT w.*, extract(epoch FROM now() - w.heartbeat_at)::float8 AS heartbeat_age_s,
               COALESCE((SELECT array_agg(j.id ORDER BY j.id) FROM jobs j
                          WHERE j.status = 'in_progress' AND j.worker_id = w.id), '{}') AS running_jobs
          FROM workers w
         WHERE $1 OR w.state <> 'stopped'
         ORDER BY w.state = 'stopped', w.started_at DESC""", include_stopped)
    return [WorkerRecord(**dict(r)) for r in rows]


async def request(conn: asyncpg.Connection, worker_id: str, command: str) -> WorkerRecord:
    """Ask a worker to pause, resume, drain or stop."""
    if command not in COMMANDS:
        raise IllegalTransition(f"unknown worker command {command!r}; use one of {', '.join(COMMANDS)}")
    async with conn.transaction():
        row = await conn.fetchrow("SELECT state FROM workers WHERE id = $1 FOR UPDATE", worker_id)
        if row is None:
            raise JobNotFound(f"no worker with id {worker_id}")
        if not worker_command_is_legal(command, row["state"]):
            allowed = ", ".join(sorted(WORKER_COMMANDS_LEGAL_FROM[command]))
            raise IllegalTransition(f"cannot {command} worker {worker_id}: it is {row['state']}; "
                                    f"{command} applies to {allowed} workers")
        await conn.execute("UPDATE workers SET requested = $2 WHERE id = $1", worker_id, command)
        await conn.execute("SELECT pg_notify($1, $2)", CONTROL_CHANNEL,
                           json.dumps({"worker": worker_id, "command": command}))
    return next(w for w in await list_workers(conn) if w.id == worker_id)


async def unserved_types(conn: asyncpg.Connection, lease_timeout_s: float, *,
                         cap: int = COUNT_CAP) -> list[UnservedType]:
    """Job types that are queued but served by no live worker (running, paused or draining,
    with a heartbeat within the lease), with how many jobs wait for each.

    Reads at most `cap` unserved queued rows, so a large backlog of them costs a bounded scan.
    """
    rows = await conn.fetch("""
        WITH served AS (
            SELECT DISTINCT unnest(job_types) AS type FROM workers
             WHERE state IN ('running', 'paused', 'draining')
               AND heartbeat_at >= now() - make_interval(secs => $1))
        SELECT type, count(*)::int AS queued
          FROM (SELECT j.type FROM jobs j
                 WHERE j.status = 'queued' AND NOT EXISTS (SELECT 1 FROM served s WHERE s.type = j.type)
                 LIMIT $2) AS unserved
         GROUP BY type ORDER BY count(*) DESC, type""", lease_timeout_s, cap)
    capped = sum(r["queued"] for r in rows) >= cap
    return [UnservedType(r["type"], r["queued"], capped) for r in rows]
