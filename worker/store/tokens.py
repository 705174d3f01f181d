"""API tokens: made once, stored as a SHA-256 hash, bound to a user or not, with scopes."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from jobdesk.core.errors import InvalidJob, JobdeskError
from jobdesk.core.json_value import JsonObject

SCOPES = ("read", "submit", "operate", "approve", "events")  # events: POST /api/events
TOKEN_PREFIX = "jdk_"  # noqa: S105 - the public mark of a jobdesk token, not a secret
# NOTIFY channel on which a revocation tells every API process to forget the tokens it cached.
TOKENS_CHANNEL = "jobdesk_api_tokens"


class TokenNotFound(JobdeskError):
    """No live token has this name."""


@dataclass(frozen=True)
class TokenRecord:
    name: str
    user_id: int | None
    scopes: frozenset[str]
    created_at: datetime

    def to_json(self) -> JsonObject:
        return {"name": self.name, "user_id": self.user_id, "scopes": sorted(self.scopes),
                "created_at": self.created_at.isoformat()}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _record(row: asyncpg.Record) -> TokenRecord:
    return TokenRecord(row["name"], row["user_id"], frozenset(row["scopes"]), row["created_at"])


async def create(conn: asyncpg.Connection, name: str, *, user_id: int | None = None,
                 scopes: list[str] | None = None) -> str:
    """Make a token and return it; only its hash is stored."""
    if not name.strip():
        raise InvalidJob("a token needs a name")
    chosen = sorted(set(scopes or SCOPES))
    unknown = [s for s in chosen if s not in SCOPES]
    if unknown:
        raise InvalidJob(f"unknown scope {unknown[0]!r}; use one of {', '.join(SCOPES)}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        await conn.execute("INSERT INTO api_tokens (name, token_hash, user_id, scopes) VALUES ($1, $2, $3, $4)",
                           name, hash_token(token), user_id, chosen)
    except asyncpg.UniqueViolationError:
        raise InvalidJob(f"a token named {name!r} exists already; revoke it first") from None
    except asyncpg.ForeignKeyViolationError:
        raise InvalidJob(f"unknown user {user_id}") from None
    return token


async def list_live(conn: asyncpg.Connection) -> list[TokenRecord]:
    rows = await conn.fetch("SELECT name, user_id, scopes, created_at FROM api_tokens "
                            "WHERE revoked_at IS NULL ORDER BY name")
    return [_record(r) for r in rows]


async def revoke(conn: asyncpg.Connection, name: str) -> None:
    row = await conn.fetchrow("UPDATE api_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL "
                              "RETURNING id", name)
    if row is None:
        raise TokenNotFound(f"no token named {name!r}")
    await conn.execute("SELECT pg_notify($1, $2)", TOKENS_CHANNEL, name)


async def lookup(conn: asyncpg.Connection, token: str) -> TokenRecord | None:
    """The live token this secret belongs to, or None."""
    row = await conn.fetchrow("SELECT name, user_id, scopes, created_at FROM api_tokens "
                              "WHERE token_hash = $1 AND revoked_at IS NULL", hash_token(token))
    return _record(row) if row else None


async def any_live(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM api_tokens WHERE revoked_at IS NULL)"))
