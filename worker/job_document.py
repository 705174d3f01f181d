"""One job as the HTTP API answers it, built by PostgreSQL as JSON text.

`GET /api/jobs/{id}` is the route frontends poll. Reading two dozen columns and the attempts
into Python objects, then writing them back out as JSON, cost that route about a fifth of its
time; PostgreSQL writes the same document in one pass. Its keys, their order and the
timestamps' form (ISO 8601 in UTC, as `datetime.isoformat` writes them) are those of
`worker.api.render.detail_json`, and a test holds the two to the same output for jobs in every
state. `waiting_reason` is added last, by `with_waiting_reason`.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import asyncpg


def _iso(column: str) -> str:
    """`column` (timestamptz) as `datetime.isoformat()` writes it in UTC: microseconds only
    when there are some."""
    utc = f"({column} AT TIME ZONE 'UTC')"
    return (f"CASE WHEN date_trunc('second', {utc}) = {utc} "
            f"THEN to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"') "
            f"ELSE to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"') END")


# (key, SQL) in the order of render._JOB_FIELDS.
_JOB_KEYS = (
    ("id", "j.id"), ("type", "j.type"), ("status", "j.status"), ("user_id", "j.user_id"),
    ("pipeline_id", "j.pipeline_id"), ("input_data", "j.input_data"), ("result_data", "j.result_data"),
    ("error_message", "j.error_message"), ("dependent_on_jobs", "COALESCE(j.dependent_on_jobs, '[]'::jsonb)"),
    ("retry_count", "j.retry_count"), ("next_retry_at", _iso("j.next_retry_at")), ("is_active", "j.is_active"),
    ("created_at", _iso("j.created_at")), ("updated_at", _iso("j.updated_at")),
    ("completed_at", _iso("j.completed_at")), ("priority", "j.priority"), ("worker_id", "j.worker_id"),
    ("started_at", _iso("j.started_at")), ("scheduled_at", _iso("j.scheduled_at")), ("unique_key", "j.unique_key"),
)
_ATTEMPT_KEYS = (
    ("attempt", "a.attempt"), ("worker_id", "a.worker_id"), ("started_at", _iso("a.started_at")),
    ("finished_at", _iso("a.finished_at")), ("outcome", "a.outcome"), ("error_message", "a.error_message"),
    ("traceback", "a.traceback"),
)


def _pairs(keys: tuple[tuple[str, str], ...]) -> str:
    """json_build_object's arguments: 'key', value, ..."""
    return ", ".join(f"'{k}', {v}" for k, v in keys)


_DOCUMENT = f"""
SELECT j.user_id, j.status,
       json_build_object({_pairs(_JOB_KEYS)},
           'attempts', COALESCE((SELECT json_agg(json_build_object({_pairs(_ATTEMPT_KEYS)}) ORDER BY a.attempt, a.id)
                                   FROM job_attempts a WHERE a.job_id = j.id), '[]'::json))::text AS document
  FROM jobs j WHERE j.id = $1"""


class JobDocument(NamedTuple):
    user_id: int | None
    status: str
    text: str  # one JSON object: the job's keys, then `attempts`


async def fetch_document(conn: asyncpg.Connection, job_id: str) -> JobDocument | None:
    row = await conn.fetchrow(_DOCUMENT, job_id)
    return None if row is None else JobDocument(row["user_id"], row["status"], row["document"])


def with_waiting_reason(document: str, reason: str | None) -> str:
    """The answer: `document` with `waiting_reason` as its last key."""
    return f'{document[:-1]}, "waiting_reason" : {json.dumps(reason)}}}'
