"""The `type_limits` table: the global concurrency limits that every worker respects.

A worker upserts its JOB_TYPE_LIMITS here when it starts; parsing lives in `jobdesk.core.limits`.
"""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg


async def declare(conn: asyncpg.Connection, limits: Mapping[str, int]) -> None:
    """Store these global limits (a worker's JOB_TYPE_LIMITS), replacing earlier values."""
    if not limits:
        return
    await conn.execute("""
        INSERT INTO type_limits (type, max_running)
        SELECT * FROM unnest($1::text[], $2::int[])
        ON CONFLICT (type) DO UPDATE SET max_running = EXCLUDED.max_running, updated_at = now()
         WHERE type_limits.max_running <> EXCLUDED.max_running""", list(limits), list(limits.values()))


async def global_limits(conn: asyncpg.Connection, types: list[str] | None = None) -> dict[str, int]:
    """The global limits, of these types (all when None)."""
    rows = await conn.fetch("SELECT type, max_running FROM type_limits "
                            "WHERE $1::text[] IS NULL OR type = ANY($1::text[])", types)
    return {r["type"]: r["max_running"] for r in rows}
