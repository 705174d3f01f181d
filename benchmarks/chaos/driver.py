"""The suite's own connection to a case's database (application_name `chaos-driver`, so that no
fault cuts it on purpose): a query that finds the connection lost reconnects and tries again."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from benchmarks.chaos.cluster import DRIVER_APP
from jobdesk.store.db import CONNECTION_ERRORS


async def connect(dsn: str, **kwargs: Any) -> asyncpg.Connection:
    return await asyncpg.connect(dsn, server_settings={"application_name": DRIVER_APP}, **kwargs)


class Driver:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: asyncpg.Connection | None = None

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await connect(self.dsn)
        return self._conn

    async def fetch(self, sql: str, *args: Any, tries: int = 60) -> list[asyncpg.Record]:
        for attempt in range(tries):
            try:
                return await (await self._connection()).fetch(sql, *args)
            except CONNECTION_ERRORS:
                self._conn = None
                if attempt == tries - 1:
                    raise
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    async def fetchval(self, sql: str, *args: Any) -> Any:
        rows = await self.fetch(sql, *args)
        return rows[0][0] if rows else None

    async def close(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()
