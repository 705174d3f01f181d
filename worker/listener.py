"""One LISTEN connection per process, apart from the pool: pushed notifications for the
worker, the console and the HTTP API. Whoever owns it polls as well, at a slower pace, so a
listener that is gone only slows updates down."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import asyncpg

from worker.db import connect

Handler = Callable[[str], None]  # gets the NOTIFY payload


class Listener:
    """LISTEN on some channels; each notification's payload goes to that channel's handler."""

    def __init__(self, dsn: str, handlers: Mapping[str, Handler]) -> None:
        self.dsn = dsn
        self.handlers = dict(handlers)
        self._conn: asyncpg.Connection | None = None

    @property
    def is_open(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def open(self) -> None:
        """Connect and LISTEN; DatabaseUnavailable if the database cannot be reached."""
        conn = await connect(self.dsn)
        try:
            for channel, handler in self.handlers.items():
                await conn.add_listener(channel, _callback(handler))
        except BaseException:
            conn.terminate()
            raise
        self._conn = conn

    async def ping(self) -> None:
        """Raise if the connection is gone (the caller then opens it again, or polls)."""
        if self._conn is None:
            raise ConnectionError("not listening")
        await self._conn.execute("SELECT 1")

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            await conn.close()

    def terminate(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()


def _callback(handler: Handler) -> Callable[[object, int, str, str], None]:
    def on_notify(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        handler(payload)

    return on_notify
