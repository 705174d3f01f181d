"""One job as the HTTP API answers it, built by PostgreSQL as JSON text.

`GET /api/jobs/{id}` is the route frontends poll. Reading two dozen columns and the attempts
into Python objects, then writing them back out as JSON, cost that route about a fifth of its
time; PostgreSQL writes the same document in one pass. Its keys, their order and the
timestamps' form (ISO 8601 in UTC, as `datetime.isoformat` writes them) are those of
`jobdesk.api.render.detail_json`, and a test holds the two to the same output for jobs in every
state. `waiting_reason` is added last, by `with_waiting_reason`.

`POST /api/jobs` answers with the same job keys, without the attempts (`fetch_job_texts`), and
adds `duplicate` last.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import NamedTuple

import asyncpg

from jobdesk.store.durable import STEP_DURATION, STEP_KEYS, STEP_ORDER


def _iso(column: str) -> str:
    """`column` (timestamptz) as `datetime.isoformat()` writes it in UTC: microseconds only
    when there are some."""
    utc = f"({column} AT TIME ZONE 'UTC')"
    return (f"CASE WHEN date_trunc('second', {utc}) = {utc} "
            f"THEN to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"') "
            f"ELSE to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"') END")


# The answer's keys, in order: `jobdesk.api.render` writes the same ones from Python objects.
JOB_KEYS = ("id", "type", "status", "user_id", "pipeline_id", "input_data", "result_data", "error_message",
            "dependent_on_jobs", "retry_count", "next_retry_at", "is_active", "created_at", "updated_at",
            "completed_at", "priority", "worker_id", "started_at", "scheduled_at", "unique_key")
PROGRESS_KEYS = ("fraction", "message", "at")
ATTEMPT_KEYS = ("attempt", "worker_id", "started_at", "finished_at", "outcome", "error_message", "traceback")


def _value(alias: str, key: str) -> str:
    """The SQL of one key: its column, timestamps (`*_at`, and progress's `at`) in `_iso`'s form."""
    column = f"{alias}.{key}"
    if key.endswith("_at") or key == "at":
        return _iso(column)
    if key == "dependent_on_jobs":
        return f"COALESCE({column}, '[]'::jsonb)"
    return column


def _pairs(alias: str, keys: tuple[str, ...]) -> str:
    """json_build_object's arguments: 'key', value, ..."""
    return ", ".join(f"'{k}', {_value(alias, k)}" for k in keys)


_STEP_PAIRS = _pairs("s", STEP_KEYS[:-1]) + f", 'duration_s', {STEP_DURATION.format(s='s')}"
_PROGRESS_PAIRS = _pairs("p", PROGRESS_KEYS)

_DOCUMENT = f"""
SELECT j.id, j.user_id, j.status,
       json_build_object({_pairs('j', JOB_KEYS)},
           'attempts', COALESCE((SELECT json_agg(json_build_object({_pairs('a', ATTEMPT_KEYS)})
                                                 ORDER BY a.attempt, a.id)
                                   FROM job_attempts a WHERE a.job_id = j.id), '[]'::json),
           'steps', COALESCE((SELECT json_agg(json_build_object({_STEP_PAIRS}) ORDER BY {STEP_ORDER.format(s='s')})
                                FROM job_steps s WHERE s.job_id = j.id), '[]'::json),
           'progress', (SELECT json_build_object({_PROGRESS_PAIRS}) FROM job_progress p WHERE p.job_id = j.id))::text
       AS document
  FROM jobs j WHERE j.id = ANY($1::varchar[])"""


def job_object(alias: str) -> str:
    """The SQL of one job's answer (`JOB_KEYS`, no attempts) as JSON text, from the row `alias`."""
    return f"json_build_object({_pairs(alias, JOB_KEYS)})::text"


_JOB = f"""
SELECT j.id, {job_object('j')} AS document
  FROM jobs j WHERE j.id = ANY($1::varchar[])"""


class JobDocument(NamedTuple):
    user_id: int | None
    status: str
    text: str  # one JSON object: the job's keys, then `attempts`, `steps` and `progress`


async def fetch_documents(conn: asyncpg.Connection, job_ids: Sequence[str]) -> dict[str, JobDocument]:
    """The documents of the jobs among `job_ids` that exist, by id: one round trip."""
    rows = await conn.fetch(_DOCUMENT, job_ids)
    return {row["id"]: JobDocument(row["user_id"], row["status"], row["document"]) for row in rows}


async def fetch_job_texts(conn: asyncpg.Connection, job_ids: Sequence[str]) -> dict[str, str]:
    """The jobs among `job_ids` that exist, by id, each as one JSON object of `JOB_KEYS` (no
    attempts): what `POST /api/jobs` answers about a job it enqueued. One round trip."""
    return {row["id"]: row["document"] for row in await conn.fetch(_JOB, job_ids)}


def with_key(document: str, key: str, value: object) -> str:
    """`document` (a JSON object's text) with `key` added last."""
    return f'{document[:-1]}, {json.dumps(key)} : {json.dumps(value)}}}'


def with_waiting_reason(document: str, reason: str | None) -> str:
    """The answer: `document` with `waiting_reason` as its last key."""
    return with_key(document, "waiting_reason", reason)
