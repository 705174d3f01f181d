"""The `type_limits` table: the global concurrency limits that every worker respects.

A worker upserts its JOB_TYPE_LIMITS here when it starts; parsing lives in `jobdesk.core.limits`.
The setting's value is kept as `env_max_running`; a limit an operator set at run time
(`type_controls`, see `jobdesk.store.type_controls`) stays in force over it.
"""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg


async def declare(conn: asyncpg.Connection, limits: Mapping[str, int]) -> None:
    """Store these global limits (a worker's JOB_TYPE_LIMITS), replacing earlier values, except
    where an operator set the limit at run time: that one stays in force."""
    if not limits:
        return
    await conn.execute("""
        INSERT INTO type_limits AS l (type, max_running, env_max_running)
        SELECT x.t, COALESCE(c.max_running, x.n), x.n
          FROM unnest($1::text[], $2::int[]) AS x(t, n) LEFT JOIN type_controls c ON c.type = x.t
        ON CONFLICT (type) DO UPDATE
           SET max_running = EXCLUDED.max_running, env_max_running = EXCLUDED.env_max_running, updated_at = now()
         WHERE (l.max_running, l.env_max_running) IS DISTINCT FROM (EXCLUDED.max_running, EXCLUDED.env_max_running)""",
        list(limits), list(limits.values()))


async def global_limits(conn: asyncpg.Connection, types: list[str] | None = None) -> dict[str, int]:
    """The global limits, of these types (all when None)."""
    rows = await conn.fetch("SELECT type, max_running FROM type_limits "
                            "WHERE $1::text[] IS NULL OR type = ANY($1::text[])", types)
    return {r["type"]: r["max_running"] for r in rows}
