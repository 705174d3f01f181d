"""A real PostgreSQL for the tests: one embedded server per session, one database per test."""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from jobdesk.embedded.server import EmbeddedServer
from jobdesk.store.migrations import migrate

TEMPLATE = "jobdesk_template"
_counter = itertools.count(1)


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def start_server() -> tuple[EmbeddedServer, Path]:
    # Short path: the Unix socket path must stay under ~100 characters.
    root = Path(tempfile.mkdtemp(prefix="jdtest-"))
    root.chmod(0o755)  # our own folder; the server may run as an unprivileged user
    server = EmbeddedServer(root)
    server.ensure_running()
    return server, root


async def skip_fsync(dsn: str) -> None:
    """Turn off `fsync` on a test server: a commit then waits for no disk flush. What a crash of
    PostgreSQL or of a client leaves behind is the same (the WAL is still written before each
    commit returns); only a crash of the whole machine could lose data, and the server is thrown
    away with the run. The benchmarks' servers keep durable commits."""
    conn = await asyncpg.connect(with_database(dsn, "postgres"))
    try:
        await conn.execute("ALTER SYSTEM SET fsync = off")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


async def build_template(dsn: str) -> None:
    conn = await asyncpg.connect(with_database(dsn, "postgres"))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE}")
        await conn.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await conn.close()
    conn = await asyncpg.connect(with_database(dsn, TEMPLATE))
    try:
        await migrate(conn)
    finally:
        await conn.close()


async def create_test_database(dsn: str) -> str:
    name = f"jdtest_{os.getpid()}_{next(_counter)}"
    conn = await asyncpg.connect(with_database(dsn, "postgres"))
    try:
        await conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    finally:
        await conn.close()
    return with_database(dsn, name)


async def drop_test_database(dsn: str) -> None:
    name = urlsplit(dsn).path.lstrip("/")
    conn = await asyncpg.connect(with_database(dsn, "postgres"))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await conn.close()
