"""Locking reads of rows that a concurrent change of status may move to another partition of
`jobs` (sql/041).

A statement that locks or updates a row which another transaction has just updated in place
waits, then follows the row to its new version. A row moved to another partition (a job that
completed, was cancelled or came back for a retry) cannot be followed: PostgreSQL raises
serialization_failure ("tuple to be locked was already moved to another partition due to
concurrent update") instead. In READ COMMITTED the same read, run again, takes a new snapshot and
finds the row where it went, so these reads run again a few times, each in a savepoint.
"""

from __future__ import annotations

import asyncpg

MOVED_RETRIES = 5

async def locking_fetch(conn: asyncpg.Connection, sql: str, *args: object) -> list[asyncpg.Record]:
    """`conn.fetch(sql, *args)` inside the caller's transaction, read again when a row it locks
    has moved to another partition meanwhile."""
    for attempt in range(MOVED_RETRIES):
        try:
            async with conn.transaction():  # a savepoint: the failed read leaves nothing behind
                return list(await conn.fetch(sql, *args))
        except asyncpg.SerializationError:
            if attempt == MOVED_RETRIES - 1 or not conn.is_in_transaction():
                raise
    raise AssertionError("unreachable")
