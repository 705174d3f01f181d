"""`connection=`: which application connections an enqueue may write through, and how each is
reached. asyncpg's and psycopg's connections are taken as they are. A framework's own objects (a
SQLAlchemy session, Django's connection) are opened up by the integration of that framework, which
registers itself here (`register_connection_kind`) when it is imported: `jobdesk.integrations.sqlalchemy`
and `jobdesk.integrations.django`. An object of a framework whose integration is not imported yet
loads the one that the package metadata names for it (entry points `jobdesk.connections`, by the
framework's top-level module), so `import jobdesk` loads no driver it does not need, and this layer
never names the layer above it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import entry_points

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from jobdesk.store.foreign import AppConnection, AsyncpgConnection, PsycopgConnection, is_psycopg

SUPPORTED = ("connection= takes, on JobClient, an asyncpg Connection, a psycopg 3 AsyncConnection or a "
             "SQLAlchemy AsyncSession or AsyncConnection; on SyncJobClient, a psycopg 3 Connection, a SQLAlchemy "
             "Session or Connection, or a Django database connection")
# The integration that opens up a framework's objects, by the framework's top-level module name.
ENTRY_POINT_GROUP = "jobdesk.connections"


@dataclass(frozen=True)
class ConnectionKind:
    """How a framework's objects lead to the driver connection under them, in the transaction the
    framework has open. Each returns None for an object it does not open up; a side left None
    means that door (`SyncJobClient`'s or `JobClient`'s) takes none of that framework's objects."""

    sync_driver: Callable[[object], object | None] | None = None
    async_driver: Callable[[object], Awaitable[object | None]] | None = None


_kinds: dict[str, ConnectionKind] = {}
_looked_up: set[str] = set()


def register_connection_kind(framework: str, kind: ConnectionKind) -> None:
    """Open up the objects of the classes of module `framework` (a top-level name: "sqlalchemy")
    with `kind`. An integration calls it as it is imported."""
    _kinds[framework] = kind


def _kind_of(obj: object) -> ConnectionKind | None:
    framework = type(obj).__module__.split(".")[0]
    if framework not in _kinds and framework not in _looked_up:
        _looked_up.add(framework)
        for entry in entry_points(group=ENTRY_POINT_GROUP, name=framework):
            entry.load()  # the integration's module, which registers itself
    return _kinds.get(framework)


async def async_writer(connection: object) -> AppConnection:
    """The asyncpg-shaped connection `JobClient` writes through for `connection`; TypeError naming
    the supported kinds for anything else (a sync connection included: that is SyncJobClient's)."""
    if isinstance(connection, AppConnection):  # opened up by SyncJobClient
        return connection
    if isinstance(connection, asyncpg.Connection | PoolConnectionProxy):
        return AsyncpgConnection(connection)
    if is_psycopg(connection):
        writer = PsycopgConnection(connection)
        if writer.is_async:
            return writer
    elif (kind := _kind_of(connection)) is not None and kind.async_driver is not None:
        driver = await kind.async_driver(connection)
        if driver is not None:
            return await async_writer(driver)
    raise TypeError(f"{SUPPORTED}; got {_describe(connection)}")


def sync_writer(connection: object) -> PsycopgConnection:
    """What `SyncJobClient` writes through for `connection`, opened up in the calling thread (Django
    ties a connection to its thread); TypeError naming the supported kinds for anything else."""
    driver: object | None = connection
    if not is_psycopg(connection) and (kind := _kind_of(connection)) is not None:
        driver = kind.sync_driver(connection) if kind.sync_driver is not None else None
    if driver is not None and is_psycopg(driver):
        writer = PsycopgConnection(driver)
        if not writer.is_async:
            return writer
    raise TypeError(f"{SUPPORTED}; got {_describe(connection)}")


def _describe(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
