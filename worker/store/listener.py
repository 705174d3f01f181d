"""One LISTEN connection per process, apart from the pool: pushed notifications for the
worker, the console and the HTTP API. Whoever owns it polls as well, at a slower pace, so a
listener that is gone only slows updates down.

A listener can also go deaf: its connection still answers, but notifications no longer reach
it (a LISTEN made through a transaction pooler, a session the network silently dropped, a
listen URL that points at another database than the one written to). So each listener sends
itself a heartbeat NOTIFY on a private channel, through the path the real notifications take
when it can (the owner's pool), and `ping()` reports it deaf when one does not come back in time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import asyncpg

from jobdesk.store.db import Database, connect

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

Handler = Callable[[str], None]  # gets the NOTIFY payload
Sender = Callable[[str, str], Awaitable[object]]  # sends NOTIFY (channel, payload) to the database
HEARTBEAT_CHANNEL_PREFIX = "jobdesk_heartbeat_"
# The channels the jobs table's triggers notify (sql/schema.sql): new runnable work, for the workers;
# the ids of changed jobs, for the console, the HTTP API's followers and the client's waits.
NEW_JOBS_CHANNEL = "jobdesk_new_jobs"
JOB_CHANGES_CHANNEL = "jobdesk_job_changes"
DEFAULT_HEARTBEAT_S = 10.0


class ListenerDeaf(ConnectionError):
    """The database answers, but the listener's own heartbeat did not come back in time."""


def listen_dsn(dsn: str, settings: Settings) -> str | None:
    """Where a process that works on `dsn` should LISTEN; None when it cannot, and must poll
    (the rule is `Database.listen_dsn`: DATABASE_LISTEN_URL for the database of DATABASE_URL only,
    otherwise `dsn` itself unless it goes through a transaction pooler)."""
    return Database.given(dsn, settings).listen_dsn()


# Why a process polls when listen_dsn() gives None, for its one log line.
NO_LISTEN_REASON = ("the database URL goes through a transaction pooler and "
                    "DATABASE_LISTEN_URL is not set, so there is no LISTEN")


class Listener:
    """LISTEN on some channels; each notification's payload goes to that channel's handler.

    `send` (a NOTIFY through the owner's pool) carries the heartbeat; without it the heartbeat
    goes through the listen connection itself, which still catches a LISTEN that lost its session.
    """

    def __init__(self, dsn: str, handlers: Mapping[str, Handler], *, send: Sender | None = None,
                 heartbeat_interval: float = DEFAULT_HEARTBEAT_S) -> None:
        self.dsn = dsn
        self.handlers = dict(handlers)
        self.send = send
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_channel = HEARTBEAT_CHANNEL_PREFIX + uuid.uuid4().hex
        self.heard = False  # a heartbeat came back since open()
        self._conn: asyncpg.Connection | None = None
        self._pending: str | None = None  # the heartbeat on its way
        self._sent_at = 0.0

    @property
    def is_open(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def open(self) -> None:
        """Connect and LISTEN; DatabaseUnavailable if the database cannot be reached."""
        conn = await connect(self.dsn)
        try:
            for channel, handler in self.handlers.items():
                await conn.add_listener(channel, _callback(handler))
            await conn.add_listener(self.heartbeat_channel, _callback(self._on_heartbeat))
        except BaseException:
            conn.terminate()
            raise
        self._conn = conn
        self.heard = False
        self._pending = None
        self._sent_at = 0.0

    async def ping(self) -> None:
        """Raise if the connection is gone (ConnectionError) or deaf (ListenerDeaf, a subclass);
        the caller then polls, and opens it again later. Call it every second or few: it returns
        at once, sends a heartbeat when one is due, and reports one that is overdue."""
        conn = self._conn
        if conn is None or conn.is_closed():
            raise ConnectionError("connection closed")
        now = time.monotonic()
        if self._pending is not None and now - self._sent_at > self.heartbeat_interval:
            raise ListenerDeaf(f"no heartbeat back on the listen connection within "
                               f"{self.heartbeat_interval:g} s")
        try:
            async with asyncio.timeout(self.heartbeat_interval):  # wait_for can lose a cancellation on 3.11
                await conn.execute("SELECT 1")
        except TimeoutError:
            raise ListenerDeaf(f"the listen connection did not answer within {self.heartbeat_interval:g} s") from None
        if self._pending is None and now - self._sent_at >= self.heartbeat_interval:
            token = uuid.uuid4().hex
            self._pending, self._sent_at = token, now
            if self.send is not None:
                await self.send(self.heartbeat_channel, token)
            else:
                await conn.execute("SELECT pg_notify($1, $2)", self.heartbeat_channel, token)

    async def close(self, timeout: float = 2.0) -> None:
        """Close gracefully; a connection that does not answer in `timeout` seconds (a heartbeat
        query cancelled on its way out can leave it waiting) is dropped."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=timeout)
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                conn.terminate()

    def terminate(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    def _on_heartbeat(self, payload: str) -> None:
        if payload == self._pending:
            self._pending = None
            self.heard = True


def _callback(handler: Handler) -> Callable[[object, int, str, str], None]:
    def on_notify(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        handler(payload)

    return on_notify
