"""Enqueue through a SQLAlchemy 2 session, in its transaction: pass the session as it is.

    async with AsyncSession(engine) as session, session.begin():
        session.add(order)
        await jobs.enqueue("send_confirmation", {"order": order.id}, connection=session)   # JobClient

    with Session(engine) as session, session.begin():
        session.add(order)
        jobs.enqueue("send_confirmation", {"order": order.id}, connection=session)         # SyncJobClient

A `Session` (or `Connection`) over psycopg 3 goes to `SyncJobClient`; an `AsyncSession` (or
`AsyncConnection`) over asyncpg or psycopg 3 to `JobClient`. The job is written through the
session's own database connection, in the transaction the session has open (one is begun if it
has none yet, as any statement of the session's would): it exists if and only if the session
commits. This module finds that connection, and registers itself with `jobdesk.service.foreign` as
it is imported (loaded by the entry point `jobdesk.connections: sqlalchemy` when a SQLAlchemy object
is first given); `jobdesk.store.foreign` writes through it.
"""

from __future__ import annotations

from typing import Any

from jobdesk.service.foreign import ConnectionKind, register_connection_kind


def _driver_of(dbapi_connection: Any) -> object:  # noqa: ANN401 - SQLAlchemy's pooled connection
    """The driver's own connection under SQLAlchemy's pooled (and, for asyncio, adapted) one."""
    return getattr(dbapi_connection, "driver_connection", dbapi_connection)


def sync_driver_connection(session: object) -> object | None:
    """The psycopg connection under a `Session` or `Connection`, in the transaction the session
    has open (or begins now); None when `session` is neither."""
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session

    if isinstance(session, Session):
        session = session.connection()  # begins the session's transaction if it has none
    if not isinstance(session, Connection):
        return None
    return _driver_of(session.connection.dbapi_connection)


async def async_driver_connection(session: object) -> object | None:
    """The asyncpg or psycopg connection under an `AsyncSession` or `AsyncConnection`, with the
    transaction the session has open begun on it; None when `session` is neither."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    if isinstance(session, AsyncSession):
        session = await session.connection()
    if not isinstance(session, AsyncConnection):
        return None
    raw = await session.get_raw_connection()
    driver = _driver_of(raw.dbapi_connection)
    in_transaction = getattr(driver, "is_in_transaction", None)
    if in_transaction is not None and not in_transaction():
        # SQLAlchemy's asyncpg adapter opens the transaction on asyncpg with the session's first
        # statement: one is run now, or the job would be written outside the session's transaction.
        await session.execute(text("SELECT 1"))
    return driver


register_connection_kind("sqlalchemy", ConnectionKind(sync_driver=sync_driver_connection,
                                                      async_driver=async_driver_connection))

__all__ = ["async_driver_connection", "sync_driver_connection"]
