"""Whether two database URLs name, or reach, one database: how `jobdesk worker --django` checks
that `DATABASE_URL` is the database of Django's settings."""

from __future__ import annotations

import asyncio

import asyncpg

from jobdesk.store.db import CONNECT_FAILURES, database_name, hosts, split_pooler


def same_database(a: str, b: str) -> bool:
    """Whether two DSNs name the same database: its name, on the same host(s) and port(s),
    whatever user, password or options each adds."""
    return database_name(a) == database_name(b) and hosts(a) == hosts(b)


async def reach_same_database(a: str, b: str, timeout: float = 10) -> bool:
    """Whether two DSNs reach one database, whatever the way to it (a pooler on another port,
    another address of the server): the same server, by its system identifier, and the same
    database in it. False when either cannot be reached or will not say."""
    found = await asyncio.gather(_database_identity(a, timeout), _database_identity(b, timeout))
    return found[0] is not None and found[0] == found[1]


async def _database_identity(dsn: str, timeout: float) -> tuple[str, str] | None:
    try:
        conn = await asyncpg.connect(split_pooler(dsn)[0], timeout=timeout, statement_cache_size=0)
        try:
            row = await conn.fetchrow("SELECT (SELECT system_identifier FROM pg_control_system())::text AS server, "
                                      "current_database() AS database")
        finally:
            await conn.close()
    except CONNECT_FAILURES:
        return None
    return (row["server"], row["database"]) if row is not None else None
