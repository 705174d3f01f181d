"""The statements of a read replica (DATABASE_READ_URL): the primary's WAL position, whether the
replica has replayed past a position, and how far behind it is. A read URL that points at a
server not in recovery (a primary) counts as always caught up."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True)
class ReplayState:
    """A replica's replay against a position of the primary's WAL."""

    standby: bool  # the server is in recovery (a streaming standby)
    caught_up: bool  # it has replayed up to the position asked about
    since_replayed_s: float | None  # seconds since the last transaction it replayed committed


# Whether the replica has replayed the primary's WAL up to the position $1 (a server not in
# recovery, a primary, always has).
_CAUGHT_UP = "NOT pg_is_in_recovery() OR coalesce(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false)"


async def wal_position(conn: asyncpg.Connection) -> str:
    """The primary's current WAL write position (a `pg_lsn` as text): every transaction
    committed so far lies before it."""
    return str(await conn.fetchval("SELECT pg_current_wal_lsn()::text"))


async def replayed_past(conn: asyncpg.Connection, lsn: str) -> bool:
    """Whether the replica has replayed the primary's WAL up to `lsn`."""
    return bool(await conn.fetchval(f"SELECT {_CAUGHT_UP}", lsn))


async def replay_state(conn: asyncpg.Connection, lsn: str) -> ReplayState:
    """The replica's replay against the primary's position `lsn`, in one statement."""
    row = await conn.fetchrow(f"""
SELECT pg_is_in_recovery() AS standby,
       {_CAUGHT_UP} AS caught_up,
       extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8 AS since_replayed""", lsn)
    since = row["since_replayed"]
    return ReplayState(bool(row["standby"]), bool(row["caught_up"]), None if since is None else max(0.0, since))
