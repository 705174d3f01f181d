"""Schema migrations: the numbered files in `sql/`, each applied once in a transaction."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from jobdesk.core.errors import JobdeskError
from jobdesk.core.paths import sql_dir

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")
# Serialises concurrent `migrate` runs (two workers starting at once, say).
LOCK_KEY = 0x6A6F6264  # "jobd"


class MigrationsMissing(JobdeskError):
    """No migration files where the package keeps them: the schema cannot be created or checked."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path


def available_migrations(folder: Path | None = None) -> list[Migration]:
    """The numbered migrations, in order; an error when there are none (an incomplete install)."""
    folder = folder or sql_dir()
    found = []
    for path in sorted(folder.glob("*.sql")):
        match = _NAME.match(path.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), path))
    if not found:
        raise MigrationsMissing(f"no migration files found in {folder}: this jobdesk installation is "
                                "incomplete; reinstall it")
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two migrations share a number in {folder}")
    return found


async def applied_versions(conn: asyncpg.Connection) -> set[int]:
    exists = await conn.fetchval("SELECT to_regclass('jobdesk_migrations') IS NOT NULL")
    if not exists:
        return set()
    return {r["version"] for r in await conn.fetch("SELECT version FROM jobdesk_migrations")}


async def migrate(conn: asyncpg.Connection, folder: Path | None = None, *, below: int | None = None,
                  timings: dict[int, tuple[float, float]] | None = None,
                  lock_timeout_ms: int | None = None) -> list[Migration]:
    """Apply the migrations not applied yet, in order (only those numbered under `below`, when
    given); return those applied now. `timings` gets, for each, the seconds its statements took
    (lock waits included) and its COMMIT took;
    with `lock_timeout_ms`, a migration whose locks do not come in time raises
    asyncpg.LockNotAvailableError (its transaction rolled back whole).

    The lock is a transaction-level advisory lock, taken again in each migration's transaction:
    through a transaction pooler a session lock would stay behind on whichever server session
    took it, and its unlock might run on another.
    """
    applied_now: list[Migration] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
        await conn.execute("""
            CREATE TABLE IF NOT EXISTS jobdesk_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now())""")
        done = await applied_versions(conn)
    for migration in available_migrations(folder):
        if migration.version in done or (below is not None and migration.version >= below):
            continue
        started = time.monotonic()
        statements = 0.0
        async with conn.transaction():
            if lock_timeout_ms is not None:
                await conn.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
            if await conn.fetchval("SELECT 1 FROM jobdesk_migrations WHERE version = $1", migration.version):
                continue  # another process applied it meanwhile
            await conn.execute(migration.path.read_text(encoding="utf-8"))
            await conn.execute("INSERT INTO jobdesk_migrations (version, name) VALUES ($1, $2)",
                               migration.version, migration.name)
            statements = time.monotonic() - started
        if timings is not None:
            timings[migration.version] = (statements, time.monotonic() - started - statements)
        log.info("applied migration %03d_%s", migration.version, migration.name)
        applied_now.append(migration)
    return applied_now


async def pending_migrations(conn: asyncpg.Connection) -> list[Migration]:
    done = await applied_versions(conn)
    return [m for m in available_migrations() if m.version not in done]
