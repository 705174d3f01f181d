"""The worker's link to its database: the pool, `call` (retried with backoff while the database
is away or after a rolled-back transaction), the embedded server's revival, and the bounded
writes of a stopping worker."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import asyncpg

from jobdesk.core.errors import JobdeskError
from jobdesk.store.db import CONNECTION_ERRORS, create_pool

if TYPE_CHECKING:
    from jobdesk.observe.metrics import WorkerMetrics

# serialization_failure raised for a row that a concurrent status change moved (sql/041)
MOVED = "already moved to another partition"
log = logging.getLogger("jobdesk.worker")

T = TypeVar("T")

MAX_BACKOFF_S = 5.0
REVIVE_EVERY_S = 2.0  # how often a worker on the embedded database tries to start it again
FINAL_WRITES_S = 10.0  # how long a stopping worker tries to give back or record what it holds


class DbLink:
    """One worker's pool, and whether its database is known to be away (`down`)."""

    def __init__(self, dsn: str, *, revive: Callable[[], bool] | None = None,
                 metrics: WorkerMetrics | None = None) -> None:
        """`revive`, given for the embedded database, starts it again when it is gone."""
        self.dsn = dsn
        self.revive = revive
        self.metrics = metrics
        self.pool: asyncpg.Pool | None = None
        self.down = False
        self._next_revive = 0.0

    async def open(self, size: int) -> asyncpg.Pool:
        self.pool = await create_pool(self.dsn, size=size, indexes_only=True, orders_from_indexes=True,
                                      report_outages=False)
        return self.pool

    async def notify(self, channel: str, payload: str) -> object:
        """NOTIFY through the pool: the listener's heartbeat takes the path new jobs' notices take."""
        assert self.pool is not None
        return await self.pool.execute("SELECT pg_notify($1, $2)", channel, payload)

    async def call(self, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """Run fn(conn), retrying with backoff while the database is unreachable or read-only,
        and after a deadlock or serialization failure (the transaction was rolled back whole)."""
        assert self.pool is not None
        delay = 0.1
        moved = 0
        while True:
            try:
                async with self.pool.acquire() as conn:
                    result = await fn(conn)
                if self.down:
                    self.down = False
                    if self.metrics is not None:
                        self.metrics.db_reconnects += 1
                    log.warning("database is back")
                return result
            except asyncpg.TransactionRollbackError as exc:
                # A deadlock or a serialization failure rolled the whole transaction back: doing
                # it again is safe, and the worker must not stop over it.
                if MOVED in str(exc) and moved < 5:
                    # A job it read moved to another partition of `jobs` as it was locked (a
                    # cancel as it was claimed, say): nothing is wrong; the next read finds it.
                    moved += 1
                    continue
                if self.metrics is not None:
                    self.metrics.db_errors += 1
                log.warning("database rolled back a transaction (%s); trying again", str(exc).splitlines()[0])
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)
            except (*CONNECTION_ERRORS, asyncpg.ReadOnlySQLTransactionError) as exc:
                if self.metrics is not None:
                    self.metrics.db_errors += 1
                if isinstance(exc, asyncpg.ReadOnlySQLTransactionError):
                    # Connected to a standby, or to an old primary that became one: like a lost
                    # connection. The pool's connections are dropped, and the next ones go to
                    # whichever host of DATABASE_URL is writable now.
                    await self.pool.expire_connections()
                if not self.down:
                    self.down = True
                    log.warning("database unreachable (%s); retrying", exc)
                if not isinstance(exc, asyncpg.CannotConnectNowError):  # not while it shuts down or starts
                    self._revive_database()
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    def _revive_database(self) -> None:
        """A safety net: the shared embedded database stops by itself only without clients, but
        `jobdesk db stop --force` or a foreground `jobdesk db` ending takes it away: start it again."""
        if self.revive is None or time.monotonic() < self._next_revive:
            return
        self._next_revive = time.monotonic() + REVIVE_EVERY_S
        try:
            if self.revive():
                log.warning("the embedded database had stopped; this worker started it again")
        except JobdeskError as exc:
            log.warning("could not start the embedded database again: %s", exc)

    async def last_write(self, write: Callable[[], Awaitable[object]], what: str) -> None:
        """One of a stopping worker's last writes, within FINAL_WRITES_S, and not tried once the
        database is known to be away: `call` would wait for it for ever, and the worker must
        exit. What was not written, the lease rescue takes back (another worker's, or this one's
        when it starts again); a job whose result was lost runs again."""
        if self.down:
            log.warning("could not %s: the database is unreachable", what)
            return
        try:
            async with asyncio.timeout(FINAL_WRITES_S):
                await write()
        except TimeoutError:
            log.warning("could not %s within %.0f s; the lease rescue takes back what this worker held",
                        what, FINAL_WRITES_S)

    async def close(self, timeout: float) -> None:
        """Close the pool; connections still in use after `timeout` seconds are dropped."""
        if self.pool is None:
            return
        try:
            async with asyncio.timeout(timeout):
                await self.pool.close()
        except TimeoutError:
            log.warning("connections still in use after %.0f s; closing them", timeout)
            self.pool.terminate()
