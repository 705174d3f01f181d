"""The part of `JobClient` and `JobService` every other part builds on: the pool, the database
it reaches, the read replica if any, the actor, the user scope."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeVar

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable, JobNotFound
from jobdesk.core.models import JobRecord
from jobdesk.core.plain_settings import load_settings
from jobdesk.service.replica import ReadReplica, ReplicaLag
from jobdesk.service.served_types import ServedTypes
from jobdesk.store import transitions
from jobdesk.store.db import CONNECTION_ERRORS, Database, describe
from jobdesk.store.jobs import JobFilter, fetch_records
from jobdesk.store.outage import reason

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

_T = TypeVar("_T")

# What a write that cannot be confirmed raises: the database away, or read-only (a standby).
WRITE_FAILURES: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, TimeoutError,
                                                   asyncpg.ReadOnlySQLTransactionError)


class ServiceBase:
    """A service's pool and who acts through it (for the audit log), optionally bound to one
    user's jobs; its lifecycle, and the checks that keep another user's jobs out of sight.

    `database` is what the pool connects to, when known (`connect` knows it): waits listen where
    it says; without it they poll.

    `replica`: the read replica (DATABASE_READ_URL) that the reads of the console and the HTTP
    API go to; None reads the primary. The one switch is `_read_pool`: a read method takes its
    connection there, everything else from `pool`, the primary (see `jobdesk.service.replica`)."""

    def __init__(self, pool: asyncpg.Pool, *, source: str = "api", actor: transitions.Actor | None = None,
                 user_id: int | None = None, settings: Settings | None = None,
                 database: Database | None = None, replica: ReadReplica | None = None) -> None:
        self.pool = pool
        self.actor = actor or transitions.Actor.current(source)
        self.user_id = user_id  # set: only this user's jobs are visible
        self.settings = settings or load_settings()
        self.database = database
        self.replica = replica
        self.served_types = ServedTypes()  # what the live workers serve, read now and then

    def as_actor(self, actor: transitions.Actor, *, user_id: int | None = None) -> Self:
        """The same service for another actor, restricted to `user_id`'s jobs when given."""
        return self._view(actor, user_id, self.replica)

    def on_primary(self) -> Self:
        """The same service with every read on the primary: for what a caller reads right after
        its own write (the HTTP API's answer to an action). Itself when there is no replica."""
        return self if self.replica is None else self._view(self.actor, self.user_id, None)

    def _view(self, actor: transitions.Actor, user_id: int | None, replica: ReadReplica | None) -> Self:
        view = type(self)(self.pool, actor=actor, user_id=user_id, settings=self.settings, database=self.database,
                          replica=replica)
        view.served_types = self.served_types  # one read of the workers for every view
        return view

    async def _read_pool(self) -> asyncpg.Pool:
        """Where a read goes: the replica when there is one and no fence holds, else the primary."""
        return self.pool if self.replica is None else await self.replica.choose(self.pool)

    async def _read_found(self, read: Callable[[asyncpg.Pool], Awaitable[_T]]) -> _T:
        """`read` on the read pool; where the replica has not got it (JobNotFound), on the primary:
        it may be too new to have reached the replica."""
        pool = await self._read_pool()
        try:
            return await read(pool)
        except JobNotFound:
            if pool is self.pool:
                raise
        return await read(self.pool)

    async def fence_reads(self, *, wait: float = 0.5) -> bool:
        """Read-your-writes: from now on, reads see every write committed before this call. Waits
        up to `wait` s for the replica to replay that far; until it has, reads go to the primary.
        True when reads are on the replica again (always, without a replica)."""
        return True if self.replica is None else await self.replica.fence(self.pool, wait=wait)

    async def replica_lag(self) -> ReplicaLag | None:
        """How far the read replica is behind the primary; None without a replica."""
        return None if self.replica is None else await self.replica.lag(self.pool)

    async def notify(self, channel: str, payload: str) -> None:
        """Send a NOTIFY through the pool: a listener's heartbeat takes the path real changes take."""
        await self.pool.execute("SELECT pg_notify($1, $2)", channel, payload)

    async def close(self) -> None:
        await self.pool.close()
        if self.replica is not None:
            await self.replica.pool.close()

    def terminate(self) -> None:
        """Drop every connection now (the database went away)."""
        self.pool.terminate()
        if self.replica is not None:
            self.replica.pool.terminate()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _write_failed(self, exc: BaseException, *, reached: bool, what: str) -> DatabaseUnavailable:
        """The error for a write that met a lost or read-only database. `reached`: the write
        had a connection, so it may have committed before the answer was lost. A read-only
        server (a standby, or an old primary after a failover) wrote nothing: the pool's
        connections are dropped, so that the next ones find the writable primary."""
        where = describe(self.database.dsn) if self.database is not None else "the database"
        why = reason(exc)
        if isinstance(exc, asyncpg.ReadOnlySQLTransactionError):
            await self.pool.expire_connections()
            return DatabaseUnavailable(f"PostgreSQL at {where} is read-only ({why}); {what} was not written; "
                                       "try again once a writable primary answers")
        if not reached:
            said = str(exc) if isinstance(exc, DatabaseUnavailable) else f"cannot reach PostgreSQL at {where} ({why})"
            return DatabaseUnavailable(f"{said}; {what} was not written")
        return DatabaseUnavailable(f"lost PostgreSQL at {where} before the write was confirmed ({why}); {what} "
                                   "may or may not have been written. A retry with the same unique key or "
                                   "idempotency key is safe")

    # -- visibility -------------------------------------------------------------------------

    def _owns(self, user_id: int | None) -> bool:
        return self.user_id is None or user_id == self.user_id

    async def _records(self, conn: asyncpg.Connection, ids: Sequence[str]) -> list[JobRecord]:
        """These jobs' records in the order given, leaving out those missing or not visible."""
        by_id = await fetch_records(conn, ids)
        return [by_id[i] for i in ids if i in by_id and self._owns(by_id[i].user_id)]

    def _scope(self, filt: JobFilter) -> JobFilter:
        if self.user_id is None:
            return filt
        if filt.user_id is not None and filt.user_id != self.user_id:
            return JobFilter(statuses=filt.statuses, user_id=-1)  # matches nothing
        return replace(filt, user_id=self.user_id)

    async def _check_visible(self, conn: asyncpg.Connection, job_ids: Sequence[str]) -> None:
        """For a user-bound service: another user's job is reported as not found."""
        if self.user_id is None or not job_ids:
            return
        rows = await conn.fetch("SELECT id FROM jobs WHERE id = ANY($1::text[]) AND user_id = $2",
                                list(job_ids), self.user_id)
        mine = {r["id"] for r in rows}
        for job_id in job_ids:
            if job_id not in mine:
                raise JobNotFound(f"no job with id {job_id}")

    async def _check_pipeline_visible(self, conn: asyncpg.Connection, pipeline_id: str) -> None:
        if self.user_id is None:
            return
        owner = await conn.fetchval("SELECT user_id FROM jobs WHERE pipeline_id = $1 ORDER BY seq LIMIT 1",
                                    pipeline_id)
        if owner != self.user_id:
            raise JobNotFound(f"no pipeline with id {pipeline_id}")
