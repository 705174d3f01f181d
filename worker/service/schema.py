"""Getting a database ready for the service and the worker: the schema checked (the embedded
database migrated on the fly), `jobdesk migrate`, and the schedules processor modules declare."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.store.db import connect
from jobdesk.store.migrations import Migration, migrate, pending_migrations
from jobdesk.store.partition_migrate import CopyReport, Progress, migrate_ahead, wants_copy_ahead

if TYPE_CHECKING:
    from jobdesk.core.schedules import Schedule


async def ensure_schema(conn: asyncpg.Connection, *, embedded: bool) -> None:
    """Migrate the embedded database on the fly; ask for `jobdesk migrate` anywhere else."""
    if embedded:
        await migrate(conn)
        return
    pending = await pending_migrations(conn)
    if pending:
        first = pending[0]
        raise DatabaseUnavailable(f"the database schema is not up to date ({len(pending)} migration(s) "
                                  f"pending, from {first.version:03d}_{first.name}); run `jobdesk migrate`")


async def prepare_schema(dsn: str, *, embedded: bool, schedules: Sequence[tuple[Schedule, str]] = ()) -> None:
    """Check the schema over one short connection (migrating the embedded database), and upsert
    `schedules` (those processor modules declare, with where each came from) on it: all that a
    worker needs done before it starts."""
    conn = await connect(dsn)
    try:
        await ensure_schema(conn, embedded=embedded)
        if schedules:  # loaded by the workers whose processor modules declare some
            from jobdesk.service.schedules import upsert_declared

            await upsert_declared(conn, schedules)
    finally:
        await conn.close()


async def migrate_database(dsn: str) -> list[Migration]:
    """Apply the pending migrations; return those applied."""
    conn = await connect(dsn)
    try:
        return await migrate(conn)
    finally:
        await conn.close()


async def migrate_database_ahead(dsn: str, progress: Progress | None = None
                                 ) -> tuple[list[Migration], CopyReport | None]:
    """`jobdesk migrate`: apply the pending migrations; on a large `jobs` that migration 041
    partitions, copy its rows ahead while the workers run (jobdesk.store.partition_migrate), and
    return what that did too (None when it was not needed)."""
    conn = await connect(dsn)
    try:
        if await wants_copy_ahead(conn):
            return await migrate_ahead(conn, progress=progress)
        return await migrate(conn), None
    finally:
        await conn.close()
