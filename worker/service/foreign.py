"""`connection=`: which application connections an enqueue may write through, and how each is
reached. asyncpg's and psycopg's connections are taken as they are; a SQLAlchemy session and
Django's connection are opened up by `jobdesk.integrations.sqlalchemy` and
`jobdesk.integrations.django`, imported only when such an object is given (found by the module
its class comes from), so `import jobdesk` loads no driver it does not need."""

from __future__ import annotations

import importlib
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from jobdesk.store.foreign import AppConnection, AsyncpgConnection, PsycopgConnection, is_psycopg

SUPPORTED = ("connection= takes, on JobClient, an asyncpg Connection, a psycopg 3 AsyncConnection or a "
             "SQLAlchemy AsyncSession or AsyncConnection; on SyncJobClient, a psycopg 3 Connection, a SQLAlchemy "
             "Session or Connection, or a Django database connection")


def _root_module(obj: object) -> str:
    return type(obj).__module__.split(".")[0]


def _integration(name: str) -> Any:  # noqa: ANN401 - a module, imported when its driver is in use
    return importlib.import_module(f"jobdesk.integrations.{name}")


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
    elif _root_module(connection) == "sqlalchemy":
        driver = await _integration("sqlalchemy").async_driver_connection(connection)
        if driver is not None:
            return await async_writer(driver)
    raise TypeError(f"{SUPPORTED}; got {_describe(connection)}")


def sync_writer(connection: object) -> PsycopgConnection:
    """What `SyncJobClient` writes through for `connection`, opened up in the calling thread (Django
    ties a connection to its thread); TypeError naming the supported kinds for anything else."""
    driver: object | None = connection
    if _root_module(connection) == "sqlalchemy":
        driver = _integration("sqlalchemy").sync_driver_connection(connection)
    elif _root_module(connection) == "django":
        driver = _integration("django").driver_connection(connection)
    if driver is not None and is_psycopg(driver):
        writer = PsycopgConnection(driver)
        if not writer.is_async:
            return writer
    raise TypeError(f"{SUPPORTED}; got {_describe(connection)}")


def _describe(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
