"""A migrated primary and an asynchronous streaming standby (tests/replication.py) for the tests
of DATABASE_READ_URL, with the standby's replay paused and resumed at will: while it is paused,
the standby keeps receiving the primary's WAL but shows none of it."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from jobdesk.core.settings import Settings, load_settings
from jobdesk.service.schema import migrate_database
from tests.replication import Pair


def start_pair() -> Pair:
    """A primary with jobdesk's schema and a standby that has replayed it."""
    pair = Pair().start(synchronous=False)
    try:
        asyncio.run(migrate_database(pair.primary.dsn()))
        lsn = pair.primary.psql("SELECT pg_current_wal_lsn()")
        deadline = time.monotonic() + 30
        while pair.standby.psql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'") != "t":
            assert time.monotonic() < deadline, "the standby did not replay the schema"
            time.sleep(0.05)
    except BaseException:
        pair.stop()
        raise
    return pair


def replica_settings(pair: Pair, **more: object) -> Settings:
    """DATABASE_URL on the primary, DATABASE_READ_URL on the standby."""
    return load_settings(DATABASE_URL=pair.primary.dsn(), DATABASE_READ_URL=pair.standby.dsn(), **more)


async def pause_replay(pair: Pair) -> None:
    """Pause the standby's replay, and return once it has (no thread: the console's loop is qasync's)."""
    conn = await asyncpg.connect(pair.standby.dsn())
    try:
        await conn.execute("SELECT pg_wal_replay_pause()")
        deadline = time.monotonic() + 10
        while await conn.fetchval("SELECT pg_get_wal_replay_pause_state()") != "paused":
            assert time.monotonic() < deadline, "the standby's replay did not pause"
            await asyncio.sleep(0.02)
    finally:
        await conn.close()


async def resume_replay(pair: Pair) -> None:
    conn = await asyncpg.connect(pair.standby.dsn())
    try:
        await conn.execute("SELECT pg_wal_replay_resume()")
    finally:
        await conn.close()
