"""An application's transaction on each driver jobdesk writes through: it saves an order and
enqueues the job that confirms it, then commits, rolls back, or raises in its block.

Each `Driver` runs one such transaction (`transact`) and says whether a job enqueued in it ran
(`outcome`: "commit", "rollback" or "raise"). Sync drivers go through `SyncJobClient`, on a
thread of their own, so the test's event loop (where the worker runs) is never blocked."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from jobdesk import JobClient, JobCreate, SyncJobClient

ORDERS = "CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY)"
SAVE_ORDER = "INSERT INTO orders (id) VALUES ('{order}')"


class Boom(Exception):
    """What the application's block raises."""


async def _enqueue(client: JobClient, order: str, connection: object, batch: int) -> str:
    """The job that confirms the order, or `batch` of them in one call (the first one's id)."""
    if batch == 1:
        return await client.enqueue("confirm", {"order": order}, connection=connection)
    jobs = [JobCreate("confirm", {"order": order, "part": i}) for i in range(batch)]
    return (await client.enqueue_many(jobs, connection=connection))[0]


def _enqueue_sync(client: SyncJobClient, order: str, connection: object, batch: int) -> str:
    if batch == 1:
        return str(client.enqueue("confirm", {"order": order}, connection=connection))
    jobs = [JobCreate("confirm", {"order": order, "part": i}) for i in range(batch)]
    return str(client.enqueue_many(jobs, connection=connection)[0])


def sqlalchemy_url(dsn: str, driver: str) -> str:
    return dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


async def _asyncpg(client: JobClient, dsn: str, order: str, outcome: str, batch: int = 1) -> str:
    conn = await asyncpg.connect(dsn, statement_cache_size=0)  # as behind a pooler in transaction mode
    job_id = ""
    try:
        if outcome == "rollback":
            tx = conn.transaction()
            await tx.start()
            await conn.execute(SAVE_ORDER.format(order=order))
            job_id = await _enqueue(client, order, conn, batch)
            await tx.rollback()
            return job_id
        async with conn.transaction():
            await conn.execute(SAVE_ORDER.format(order=order))
            job_id = await _enqueue(client, order, conn, batch)
            if outcome == "raise":
                raise Boom
    except Boom:
        pass
    finally:
        await conn.close()
    return job_id


async def _psycopg_async(client: JobClient, dsn: str, order: str, outcome: str, batch: int = 1) -> str:
    import psycopg

    job_id = ""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        try:
            await conn.execute(SAVE_ORDER.format(order=order))
            job_id = await _enqueue(client, order, conn, batch)
            if outcome == "raise":
                raise Boom
            await (conn.commit() if outcome == "commit" else conn.rollback())
        except Boom:
            await conn.rollback()
    return job_id


async def _sqlalchemy_async(client: JobClient, dsn: str, order: str, outcome: str, driver: str,
                            batch: int = 1) -> str:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
    from sqlalchemy.pool import NullPool

    url = sqlalchemy_url(dsn, driver)
    connect_args: dict[str, object] = {"prepare_threshold": None}
    if driver == "asyncpg":
        # As SQLAlchemy asks of asyncpg behind a pooler: statements named uniquely, none cached.
        url = url.replace("sslmode=disable", "ssl=disable")
        connect_args = {"statement_cache_size": 0, "prepared_statement_cache_size": 0,
                        "prepared_statement_name_func": lambda: f"__asyncpg_{uuid.uuid4()}__"}
    engine = create_async_engine(url, connect_args=connect_args, poolclass=NullPool)
    job_id = ""
    try:
        async with AsyncSession(engine) as session:
            try:
                async with session.begin():
                    await session.execute(text(SAVE_ORDER.format(order=order)))
                    job_id = await _enqueue(client, order, session, batch)
                    if outcome == "raise":
                        raise Boom
                    if outcome == "rollback":
                        await session.rollback()
            except Boom:
                pass
    finally:
        await engine.dispose()
    return job_id


def _psycopg_sync(client: SyncJobClient, dsn: str, order: str, outcome: str, batch: int = 1) -> str:
    import psycopg

    job_id = ""
    with psycopg.Connection.connect(dsn, prepare_threshold=None) as conn:
        try:
            with conn.transaction():
                conn.execute(SAVE_ORDER.format(order=order))
                job_id = _enqueue_sync(client, order, conn, batch)
                if outcome == "raise":
                    raise Boom
                if outcome == "rollback":
                    raise psycopg.Rollback
        except Boom:
            pass
    return job_id


def _sqlalchemy_sync(client: SyncJobClient, dsn: str, order: str, outcome: str, batch: int = 1) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    engine = create_engine(sqlalchemy_url(dsn, "psycopg"), connect_args={"prepare_threshold": None})
    job_id = ""
    try:
        with Session(engine) as session:
            try:
                with session.begin():
                    session.execute(text(SAVE_ORDER.format(order=order)))
                    job_id = _enqueue_sync(client, order, session, batch)
                    if outcome == "raise":
                        raise Boom
                    if outcome == "rollback":
                        session.rollback()
            except Boom:
                pass
    finally:
        engine.dispose()
    return job_id


@dataclass(frozen=True)
class Driver:
    name: str
    run: Callable[..., object]
    sync: bool = False

    async def transact(self, client: JobClient, sync_client: Callable[[], SyncJobClient], dsn: str,
                       order: str, outcome: str, batch: int = 1) -> str:
        """One application transaction through this driver; the id of the job enqueued in it
        (with `batch`, of the first of so many enqueued in one call)."""
        if self.sync:
            return await asyncio.to_thread(self.run, sync_client(), dsn, order, outcome, batch)  # type: ignore[arg-type]
        coro = self.run(client, dsn, order, outcome, batch)
        assert isinstance(coro, Awaitable)
        return str(await coro)


DRIVERS = [
    Driver("asyncpg", _asyncpg),
    Driver("psycopg-async", _psycopg_async),
    Driver("psycopg-sync", _psycopg_sync, sync=True),
    Driver("sqlalchemy-asyncsession-asyncpg", lambda c, d, o, x, n=1: _sqlalchemy_async(c, d, o, x, "asyncpg", n)),
    Driver("sqlalchemy-asyncsession-psycopg", lambda c, d, o, x, n=1: _sqlalchemy_async(c, d, o, x, "psycopg", n)),
    Driver("sqlalchemy-session", _sqlalchemy_sync, sync=True),
]
