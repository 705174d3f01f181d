"""A connection of jobdesk's knows PostgreSQL's built-in array types without asking the server:
asyncpg's introspection of an array type costs a new session 2 to 6 ms (the worker's first claim,
a CLI command's first list), so jobdesk declares those codecs when it connects."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import asyncpg
import pytest

from jobdesk.store import db
from jobdesk.store.array_codecs import BUILTIN_ARRAYS

VALUES = {
    "bool[]": [True, False], "int2[]": [1, -2], "int4[]": [1, 2], "int8[]": [2**40], "float4[]": [0.5],
    "float8[]": [1.25, -3.0], "varchar[]": ["a", "b,c", 'say "hi"'], "bpchar[]": ["x"], "name[]": ["jobs"],
    "oid[]": [26], "numeric[]": [Decimal("1.50")], "uuid[]": [uuid.UUID(int=7)],
    "timestamptz[]": [dt.datetime(2026, 12, 7, 6, 0, tzinfo=dt.UTC)],
    "timestamp[]": [dt.datetime(2026, 12, 7, 6, 0)], "date[]": [dt.date(2026, 12, 7)], "time[]": [dt.time(6, 30)],
    "interval[]": [dt.timedelta(seconds=90)], "jsonb[]": [{"a": [1, 2]}, "text"], "json[]": [[1, {"b": None}]],
    "bytea[]": [b"\x00\x01"],
}


@pytest.fixture
def introspections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The type OIDs asyncpg asks the server about, in this test."""
    asked: list[object] = []
    real = asyncpg.Connection._introspect_types

    async def counted(self: asyncpg.Connection, typeoids: object, timeout: object) -> object:
        asked.append(typeoids)
        return await real(self, typeoids, timeout)

    monkeypatch.setattr(asyncpg.Connection, "_introspect_types", counted)
    return asked


async def test_builtin_arrays_round_trip_without_asking_the_server(dsn: str, introspections: list[object]) -> None:
    conn = await db.connect(dsn)
    try:
        for type_name, value in VALUES.items():
            assert await conn.fetchval(f"SELECT $1::{type_name}", value) == value, type_name
            # and one the server makes, decoded from its own output
            assert await conn.fetchval(f"SELECT ARRAY[$1::{type_name.removesuffix('[]')}]", value[0]) == value[:1]
        oids = {r["typarray"] for r in await conn.fetch(
            "SELECT typarray FROM pg_type WHERE oid::regtype::text = ANY($1::text[])",
            ["boolean", "smallint", "integer", "bigint", "real", "double precision", "character varying",
             "character", "name", "oid", "numeric", "uuid", "timestamp with time zone",
             "timestamp without time zone", "date", "time without time zone", "interval", "jsonb", "json", "bytea"])}
    finally:
        await conn.close()
    assert introspections == [], "asyncpg asked the server about an array type jobdesk declares"
    assert oids == set(BUILTIN_ARRAYS), "the declared OIDs are the server's"


async def test_a_pools_connections_know_them_too(dsn: str, introspections: list[object]) -> None:
    pool = await db.create_pool(dsn, size=2)
    try:
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT $1::int8[]", [1, 2]) == [1, 2]
    finally:
        await pool.close()
    assert introspections == []
