"""The enqueue statements on an application's own connection (asyncpg, or psycopg 3), inside its
transaction.

The statements of `transitions.inserts` are written for asyncpg (`$1` parameters, asyncpg's
errors). `AsyncpgConnection` hands them to an application's asyncpg connection as they are;
`PsycopgConnection` gives them the part of asyncpg's connection they use (`execute`, `fetch`,
`fetchval`, `transaction`, `copy_to_table` for a large batch) over a psycopg connection, sync or
async: this module is the one place where `$n` becomes psycopg's `%(pn)s`, and where psycopg's
server errors become the asyncpg errors the statements already turn into `InvalidJob`. So a job
enqueued through the application's connection is checked and written by the same code as one
enqueued through the pool.

psycopg is imported only here, and only when such a connection is used. Every psycopg statement
runs unprepared (`prepare=False`): behind PgBouncer in transaction mode, a named prepared
statement left on the application's connection would break its next transaction.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import asyncpg

# A `$n` parameter outside a quoted literal; a literal `%` is doubled for psycopg.
_TOKENS = re.compile(r"'(?:[^']|'')*'|\$(\d+)|%")
_savepoints = itertools.count(1)


def psycopg_sql(sql: str) -> str:
    """asyncpg's `$n` placeholders as psycopg's named `%(pn)s` (a parameter may be used twice)."""

    def swap(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return f"%(p{match.group(1)})s"
        return "%%" if match.group(0) == "%" else match.group(0)

    return _TOKENS.sub(swap, sql)


def psycopg_params(args: tuple[object, ...]) -> dict[str, object]:
    """The values of `$1..$n` by psycopg's names. Lists go as arrays, text (JSON travels as text
    and is cast in the SQL), numbers and timestamps as themselves: psycopg adapts each."""
    return {f"p{i}": value for i, value in enumerate(args, start=1)}


def as_asyncpg_error(exc: BaseException) -> BaseException:
    """A server error reported by psycopg as the asyncpg error of its SQLSTATE (with its detail),
    so the callers' `except asyncpg.UniqueViolationError` and the like see it; anything else as it is."""
    sqlstate = getattr(exc, "sqlstate", None)
    if not sqlstate:
        return exc
    diag = getattr(exc, "diag", None)
    fields = {"C": sqlstate, "M": getattr(diag, "message_primary", None) or str(exc),
              "D": getattr(diag, "message_detail", None), "n": getattr(diag, "constraint_name", None)}
    return cast(BaseException, asyncpg.PostgresError.new({k: v for k, v in fields.items() if v is not None}))


class AppConnection:
    """An application's connection as the enqueue statements use it: `execute`, `fetch`,
    `fetchval` and `transaction`, asyncpg's names. Its `transaction()` is a savepoint inside the
    application's transaction, written out so that it works however that transaction was begun
    (asyncpg's `transaction()` refuses one begun by a plain BEGIN; psycopg's, on a connection not in
    autocommit with no transaction open yet, would commit the application's transaction at its
    end); on a connection with no transaction open, a transaction of its own."""

    raw: Any

    @property
    def in_transaction(self) -> bool:
        raise NotImplementedError

    async def execute(self, sql: str, *args: object) -> str:
        raise NotImplementedError

    @asynccontextmanager
    async def _own_transaction(self) -> AsyncIterator[None]:
        raise NotImplementedError
        yield

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if not self.in_transaction:
            async with self._own_transaction():
                yield
            return
        name = f"jobdesk_enqueue_{next(_savepoints)}"
        await self.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            await self.execute(f"ROLLBACK TO SAVEPOINT {name}")
            raise
        await self.execute(f"RELEASE SAVEPOINT {name}")


class AsyncpgConnection(AppConnection):
    """An application's asyncpg connection (a pool's too), its statements as they are."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.raw = conn

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.is_in_transaction())

    async def execute(self, sql: str, *args: object) -> str:
        return str(await self.raw.execute(sql, *args))

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        return list(await self.raw.fetch(sql, *args))

    async def fetchval(self, sql: str, *args: object) -> object:
        return await self.raw.fetchval(sql, *args)

    async def copy_to_table(self, table_name: str, *, source: memoryview, columns: Sequence[str],
                            format: str) -> str:
        """A large batch's COPY (`transitions.copy_in`), on the application's connection."""
        return str(await self.raw.copy_to_table(table_name, source=source, columns=columns, format=format))

    @asynccontextmanager
    async def _own_transaction(self) -> AsyncIterator[None]:
        async with self.raw.transaction():
            yield


class PsycopgConnection(AppConnection):
    """A psycopg 3 connection (`Connection` or `AsyncConnection`) seen as the asyncpg connection the
    enqueue statements expect. A sync connection's calls block: the sync client runs them on its
    own thread (see `jobdesk.service.sync_client`)."""

    def __init__(self, conn: Any) -> None:  # noqa: ANN401 - psycopg is optional: no type to name
        self.raw = conn
        self.is_async = _is_async(conn)

    @property
    def in_transaction(self) -> bool:
        """Whether a statement now runs in the application's transaction: the connection is in
        one, or is not in autocommit (psycopg opens the transaction with the next statement)."""
        from psycopg.pq import TransactionStatus

        return not self.raw.autocommit or self.raw.info.transaction_status != TransactionStatus.IDLE

    async def _run(self, sql: str, args: tuple[object, ...]) -> list[Mapping[str, Any]]:
        from psycopg import Error
        from psycopg.rows import dict_row

        query, params = psycopg_sql(sql), psycopg_params(args)
        try:
            if self.is_async:
                async with self.raw.cursor(row_factory=dict_row) as cur:
                    await cur.execute(query, params, prepare=False)
                    return await cur.fetchall() if cur.description is not None else []
            with self.raw.cursor(row_factory=dict_row) as cur:
                cur.execute(query, params, prepare=False)
                return cur.fetchall() if cur.description is not None else []
        except Error as exc:
            raise as_asyncpg_error(exc) from exc

    async def execute(self, sql: str, *args: object) -> str:
        await self._run(sql, args)
        return ""

    async def fetch(self, sql: str, *args: object) -> list[Mapping[str, Any]]:
        return await self._run(sql, args)

    async def fetchval(self, sql: str, *args: object) -> object:
        rows = await self._run(sql, args)
        return next(iter(rows[0].values())) if rows else None

    async def copy_to_table(self, table_name: str, *, source: memoryview, columns: Sequence[str],
                            format: str) -> str:
        """A large batch's COPY (`transitions.copy_in`, text format) through psycopg's COPY. The
        text goes as str: psycopg encodes it as the connection's client encoding wants."""
        from psycopg import Error

        statement = f"COPY {table_name} ({', '.join(columns)}) FROM STDIN (FORMAT {format})"
        text = str(source, "utf-8")
        try:
            if self.is_async:
                async with self.raw.cursor() as cur, cur.copy(statement) as copy:
                    await copy.write(text)
            else:
                with self.raw.cursor() as cur, cur.copy(statement) as copy:
                    copy.write(text)
        except Error as exc:
            raise as_asyncpg_error(exc) from exc
        return ""

    @asynccontextmanager
    async def _own_transaction(self) -> AsyncIterator[None]:
        if self.is_async:
            async with self.raw.transaction():
                yield
        else:
            with self.raw.transaction():
                yield


def _is_async(conn: object) -> bool:
    from psycopg import AsyncConnection

    return isinstance(conn, AsyncConnection)


def is_psycopg(conn: object) -> bool:
    """Whether `conn` is a psycopg 3 connection (without importing psycopg when it cannot be one)."""
    if not any(cls.__module__.split(".")[0] == "psycopg" for cls in type(conn).__mro__):
        return False
    from psycopg import AsyncConnection, Connection

    return isinstance(conn, AsyncConnection | Connection)


@asynccontextmanager
async def enqueue_scope(conn: AppConnection) -> AsyncIterator[None]:
    """Around an enqueue on an application's connection: nothing when it runs in the application's
    transaction (the job then commits or rolls back with it), else a transaction of its own, so a
    batch is written whole or not at all."""
    if conn.in_transaction:
        yield
    else:
        async with conn.transaction():
            yield
