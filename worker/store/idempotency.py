"""Idempotency keys of the HTTP API: the first answer to a POST, kept for 24 hours in the
database, so a retried request gets it back from whichever API process it reaches."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import asyncpg

from jobdesk.core.errors import JobdeskError
from jobdesk.core.json_value import JsonValue

TTL_HOURS = 24


class IdempotencyConflict(JobdeskError):
    """The key was used before with another request body."""


@dataclass(frozen=True)
class Replay:
    status_code: int
    response: JsonValue


def fingerprint(route: str, body: object) -> str:
    """The same request gives the same fingerprint whatever its key order or spacing."""
    text = json.dumps([route, body], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


async def claim(conn: asyncpg.Connection, owner: str, key: str, print_: str) -> Replay | None:
    """Inside a transaction: take the key for this request (None: go on and answer), or give
    the answer stored for it. A concurrent request with the same key waits here until the
    first one commits (or rolls back, which frees the key)."""
    await conn.execute("DELETE FROM api_idempotency_keys WHERE owner = $1 AND key = $2 "
                       f"AND created_at < now() - interval '{TTL_HOURS} hours'", owner, key)
    taken = await conn.fetchval("INSERT INTO api_idempotency_keys (owner, key, fingerprint) VALUES ($1, $2, $3) "
                                "ON CONFLICT (owner, key) DO NOTHING RETURNING true", owner, key, print_)
    if taken:
        return None
    row = await conn.fetchrow("SELECT fingerprint, status_code, response FROM api_idempotency_keys "
                              "WHERE owner = $1 AND key = $2", owner, key)
    if row is None:  # expired and removed between the two statements: very unlikely; ask again
        raise IdempotencyConflict(f"Idempotency-Key {key!r} is being reused right now; try again")
    if row["fingerprint"] != print_:
        raise IdempotencyConflict(f"Idempotency-Key {key!r} was used before with a different request body")
    return Replay(row["status_code"], row["response"])


async def store(conn: asyncpg.Connection, owner: str, key: str, status_code: int, response: object) -> None:
    await conn.execute("UPDATE api_idempotency_keys SET status_code = $3, response = $4::jsonb "
                       "WHERE owner = $1 AND key = $2", owner, key, status_code, response)

