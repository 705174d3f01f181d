"""A connection pool that hands its connections out in the order they were asked for.

asyncpg's pool keeps free connections in an asyncio queue, whose `get` lets a caller that
arrives while a woken waiter has not yet run take the connection first; the waiter then queues
again at the back. Under load (64 API requests on a pool of 20) that made a few requests wait
for hundreds of milliseconds while later ones went through. A FIFO semaphore of the pool's size
in front of asyncpg's own acquire gives every caller its turn in arrival order: past it, a
connection is always free.

It also says, once, when its database goes away and when it is back (`jobdesk.store.outage`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from jobdesk.store.outage import UNREACHABLE, Outage, Unreachable, outage, reason

# What asyncpg.create_pool passes its Pool when not told otherwise; the Pool itself has no defaults.
_CREATE_POOL_DEFAULTS: dict[str, Any] = {"max_queries": 50_000, "loop": None, "connection_class": asyncpg.Connection,
                                         "record_class": asyncpg.Record}


class FairPool(asyncpg.Pool):
    """Built as asyncpg.create_pool builds its pool (`await FairPool(dsn, ...)`)."""

    def __init__(self, *args: Any, max_size: int, where: str | None = None,  # noqa: ANN401
                 **kwargs: Any) -> None:  # noqa: ANN401
        """`where` (the database in words) for a front door's pool: it logs when the database goes
        away and comes back, and a connection it cannot make raises DatabaseUnavailable (also a
        ConnectionError). None for a pool whose owner handles both itself (the worker's)."""
        super().__init__(*args, max_size=max_size, **{**_CREATE_POOL_DEFAULTS, **kwargs})
        self.outage: Outage | None = outage(where) if where is not None else None
        self._turns = asyncio.Semaphore(max_size)  # taken by every acquire, given back on release
        # The connections lent out, by the id of the proxy handed out (held here, so the id stays
        # its own): each gives its turn back once, when released, whatever became of it.
        self._lent: dict[int, PoolConnectionProxy] = {}

    async def _acquire(self, timeout: float | None) -> PoolConnectionProxy:
        if timeout is None:
            await self._turns.acquire()
        else:
            async with asyncio.timeout(timeout):
                await self._turns.acquire()
        try:
            proxy: PoolConnectionProxy = await super()._acquire(timeout)
        except BaseException:
            self._turns.release()
            raise
        self._lent[id(proxy)] = proxy
        return proxy

    async def _get_new_connection(self) -> asyncpg.Connection:
        try:
            conn: asyncpg.Connection = await super()._get_new_connection()
        except Exception as exc:  # re-raised: noted for the log on the way
            if self.outage is None or self.is_closing():
                raise
            self.outage.down(reason(exc))
            if isinstance(exc, UNREACHABLE) and not isinstance(exc, Unreachable):
                raise Unreachable(f"cannot connect to PostgreSQL at {self.outage.where}: {reason(exc)}") from exc
            raise
        if self.outage is not None:
            self.outage.up()
        return conn

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:  # noqa: ANN401
        # Only a connection this pool lent gives a turn back, once. One the server dropped while
        # it was out has already gone back to asyncpg's queue by itself (its proxy is detached),
        # but its turn has not.
        lent = self._lent.pop(id(connection), None) is connection
        try:
            await super().release(connection, timeout=timeout)
        finally:
            if lent:
                self._turns.release()
