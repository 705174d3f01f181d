"""Concurrency limits per job type: parsing `TYPE=N,TYPE=N`, and the `type_limits` table.

A global limit (JOB_TYPE_LIMITS) lives in `type_limits`, which every worker upserts from its
setting when it starts, so that workers without the setting respect it too. A per-worker cap
(`jobdesk worker --limit TYPE=N`) stays local to that worker. The claim of a limited type is
in `transitions.claim_limited`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import asyncpg


@dataclass(frozen=True)
class ClaimLimits:
    """What a worker knows of the limits on its types: which have a global limit (the number
    itself is read, locked, by each claim) and its own caps."""

    fleet: frozenset[str] = frozenset()  # types with a row in type_limits
    local: Mapping[str, int] = field(default_factory=dict)  # this worker's caps

    def limited(self, types: Iterable[str]) -> list[str]:
        return [t for t in types if t in self.fleet or t in self.local]


def parse_type_limits(text: str) -> dict[str, int]:
    """`video.render=2,image.generate=4` as {type: N}; ValueError naming the bad part."""
    limits: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        limits.update(parse_type_limit(part))
    return limits


def parse_type_limit(part: str) -> dict[str, int]:
    """One `TYPE=N` (N at least 1)."""
    name, sep, count = part.rpartition("=")
    name = name.strip()
    if not sep or not name or len(name) > 255:
        raise ValueError(f"{part!r} is not TYPE=N, like video.render=2")
    try:
        value = int(count.strip())
    except ValueError:
        raise ValueError(f"{part!r}: N must be a whole number, like video.render=2") from None
    if value < 1:
        raise ValueError(f"{part!r}: N must be at least 1")
    return {name: value}


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
