"""Connections to PostgreSQL: which database, and asyncpg pools with jobdesk's codecs."""

from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from worker.errors import DatabaseUnavailable
from worker.settings import Settings

log = logging.getLogger(__name__)

# Errors that mean "the database is not there (right now)", as opposed to a bad query.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ConnectionError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.InternalClientError,
)


# Failures a front door expects and shows as a message: the database is away, refused a query
# (a timeout, a missing right) or is not there yet. Anything else is a bug.
EXPECTED_DB_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, asyncpg.PostgresError, TimeoutError)


def is_starting_up(exc: BaseException) -> bool:
    """Whether a failed connection met a server that is starting or shutting down."""
    return isinstance(exc.__cause__ or exc, asyncpg.CannotConnectNowError)


def describe(dsn: str) -> str:
    """Where a DSN points, in words: host and database, or the socket folder."""
    parts = urlsplit(dsn)
    query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    host = parts.hostname or query.get("host") or os.environ.get("PGHOST") or "localhost"
    port = parts.port or query.get("port") or 5432
    db = parts.path.lstrip("/") or parts.username or "postgres"
    return f"{db} on {host}:{port}"


@dataclass
class Target:
    """The database a process uses: a DSN, and whether it is the embedded default."""

    dsn: str
    embedded: bool

    def describe(self) -> str:
        return ("embedded " if self.embedded else "") + describe(self.dsn)


def resolve_target(settings: Settings) -> Target:
    """DATABASE_URL as given, or the embedded server (started now if nobody runs it yet)."""
    if settings.DATABASE_URL:
        return Target(settings.DATABASE_URL, embedded=False)
    from worker.embedded import embedded_server

    return Target(embedded_server().ensure_running(), embedded=True)


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


def _unavailable(dsn: str, exc: BaseException) -> DatabaseUnavailable:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseUnavailable(f"cannot connect to PostgreSQL at {describe(dsn)}: {reason}")


async def connect(dsn: str, *, timeout: float = 10, **kwargs: Any) -> asyncpg.Connection:
    """One connection with jobdesk's codecs; DatabaseUnavailable if it cannot be had."""
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout, **kwargs)
    except (*CONNECTION_ERRORS, asyncpg.PostgresError, TimeoutError, socket.gaierror,
            ValueError) as exc:
        raise _unavailable(dsn, exc) from exc
    await _init_connection(conn)
    return conn


async def create_pool(dsn: str, *, size: int, timeout: float = 10,
                      server_settings: dict[str, str] | None = None) -> asyncpg.Pool:
    """A pool of `size` connections with jobdesk's codecs."""
    try:
        pool = await asyncpg.create_pool(dsn, min_size=min(2, size), max_size=size, timeout=timeout,
                                         init=_init_connection, server_settings=server_settings,
                                         max_inactive_connection_lifetime=300)
    except (*CONNECTION_ERRORS, asyncpg.PostgresError, TimeoutError, socket.gaierror,
            ValueError) as exc:
        raise _unavailable(dsn, exc) from exc
    assert pool is not None
    return pool
