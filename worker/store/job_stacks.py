"""Running jobs' stacks in the database (`job_stack_requests`, `job_stacks`, migration 034).

An asker inserts a request for the worker that runs the job and notifies it on the control
channel; the worker takes its requests (a NOTIFY heard, or the query it already makes for its
running jobs' cancellations while it cannot LISTEN), writes the stacks, and the asker reads the
one taken after its request. While nobody asks, the request table is empty and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from jobdesk.core.job_stack import JobStack, StackFrame
from jobdesk.store.transitions import CONTROL_CHANNEL

# The control message `{"stack": JOB_ID, "stack_worker": WORKER_ID}` says a job's stack is asked of a worker.
STACK_KEY = "stack"
WORKER_KEY = "stack_worker"
FORGOTTEN_AFTER_S = 30.0  # a request this old was left by an asker that went away: dropped


@dataclass(frozen=True)
class StackState:
    """A job as an asker for its stack sees it: its status, the worker that holds it and the
    attempt it runs, and its kept stack (None when no stack was ever taken)."""

    status: str
    user_id: int | None
    worker_id: str | None
    attempt: int
    kept: JobStack | None


async def job_state(conn: asyncpg.Connection, job_id: str) -> StackState | None:
    """The job and its kept stack in one read; None when there is no such job."""
    row = await conn.fetchrow("""
        SELECT j.status, j.user_id, j.worker_id, j.attempts,
               s.attempt AS s_attempt, s.worker_id AS s_worker, s.taken_at, s.frames::text AS frames
          FROM jobs j LEFT JOIN job_stacks s ON s.job_id = j.id
         WHERE j.id = $1""", job_id)
    if row is None:
        return None
    kept = None
    if row["taken_at"] is not None:
        frames = [StackFrame.from_json(f) for f in json.loads(row["frames"])]
        running = row["status"] == "in_progress" and row["attempts"] == row["s_attempt"]
        kept = JobStack(job_id, row["s_attempt"], row["s_worker"], row["taken_at"], frames, running, row["status"])
    return StackState(row["status"], row["user_id"], row["worker_id"], row["attempts"], kept)


async def ask(conn: asyncpg.Connection, job_id: str, worker_id: str) -> tuple[int, datetime]:
    """Ask `worker_id` for the stack of `job_id`: the request's id and when it was made."""
    row = await conn.fetchrow("""
        WITH r AS (INSERT INTO job_stack_requests (job_id, worker_id) VALUES ($1, $2) RETURNING id, asked_at)
        SELECT r.id, r.asked_at, pg_notify($3, $4) FROM r""",
        job_id, worker_id, CONTROL_CHANNEL, json.dumps({STACK_KEY: job_id, WORKER_KEY: worker_id}))
    assert row is not None
    return row["id"], row["asked_at"]


async def withdraw(conn: asyncpg.Connection, request_id: int) -> None:
    """An asker gives up: its request is not left for the worker."""
    await conn.execute("DELETE FROM job_stack_requests WHERE id = $1", request_id)


async def running_news(conn: asyncpg.Connection, worker_id: str,
                       job_ids: Sequence[str]) -> tuple[list[str], bool]:
    """What a worker learns of its running jobs in one round trip: which of them an operator
    has cancelled, and whether a stack is asked of it (the request table's index, one probe)."""
    row = await conn.fetchrow("""
        SELECT ARRAY(SELECT id FROM jobs WHERE id = ANY($1::text[]) AND NOT is_active) AS cancelled,
               EXISTS (SELECT 1 FROM job_stack_requests WHERE worker_id = $2) AS asked""",
        list(job_ids), worker_id)
    assert row is not None
    return list(row["cancelled"]), bool(row["asked"])


async def take_requests(conn: asyncpg.Connection, worker_id: str,
                        held: Sequence[str]) -> tuple[list[str], bool]:
    """Take (delete) the requests to `worker_id` for the jobs it holds: their ids, and whether
    requests for other jobs wait (a job just claimed, whose claim the worker has not read yet).
    Requests older than FORGOTTEN_AFTER_S, whose asker has gone, are dropped."""
    row = await conn.fetchrow("""
        WITH taken AS (
            DELETE FROM job_stack_requests
             WHERE worker_id = $1 AND (job_id = ANY($2::text[]) OR asked_at < now() - make_interval(secs => $3))
            RETURNING job_id)
        SELECT ARRAY(SELECT DISTINCT job_id FROM taken WHERE job_id = ANY($2::text[])) AS taken,
               EXISTS (SELECT 1 FROM job_stack_requests
                        WHERE worker_id = $1 AND NOT job_id = ANY($2::text[])
                          AND asked_at >= now() - make_interval(secs => $3)) AS waiting""",
        worker_id, list(held), FORGOTTEN_AFTER_S)
    assert row is not None
    return sorted(row["taken"]), bool(row["waiting"])


async def keep(conn: asyncpg.Connection, worker_id: str,
               stacks: Sequence[tuple[str, int, Sequence[StackFrame]]]) -> None:
    """Write the stacks taken (job id, attempt, frames) over each job's last, in one statement;
    a job deleted meanwhile is left out (its key locked as a foreign key's check would)."""
    if not stacks:
        return
    await conn.execute("""
        INSERT INTO job_stacks (job_id, attempt, worker_id, taken_at, frames)
        SELECT u.job_id, u.attempt, $1, now(), u.frames::jsonb
          FROM unnest($2::varchar[], $3::int[], $4::text[]) AS u(job_id, attempt, frames)
          JOIN jobs j ON j.id = u.job_id
           FOR KEY SHARE OF j
        ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, worker_id = EXCLUDED.worker_id,
                                           taken_at = EXCLUDED.taken_at, frames = EXCLUDED.frames""",
        worker_id, [s[0] for s in stacks], [s[1] for s in stacks],
        [json.dumps([f.to_json() for f in s[2]]) for s in stacks])
