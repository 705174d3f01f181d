"""sql/schema.sql is current: it is what a fresh migration makes, dumped as `make schema` dumps it,
and the migration runner never takes it for a migration."""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.paths import sql_dir
from jobdesk.embedded.server import EmbeddedServer
from jobdesk.store.migrations import MigrationsMissing, available_migrations, migrate
from jobdesk.store.schema_dump import HEADER, normalise, schema_path, schema_text
from tests import pg

DIFF_LINES = 40  # of the unified diff shown on a failure


def short_diff(expected: str, actual: str) -> str:
    lines = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "sql/schema.sql (checked in)",
                                      "schema of a fresh migration", n=2, lineterm=""))
    more = f"\n... and {len(lines) - DIFF_LINES} more diff lines" if len(lines) > DIFF_LINES else ""
    return "\n".join(lines[:DIFF_LINES]) + more


async def test_the_schema_file_matches_a_fresh_migration(pg_server: EmbeddedServer) -> None:
    name = f"jdschema_{os.getpid()}"
    admin = await asyncpg.connect(pg.with_database(pg_server.dsn, "postgres"))
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name}")
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE template0")
        dsn = pg.with_database(pg_server.dsn, name)
        conn = await asyncpg.connect(dsn)
        try:
            await migrate(conn)
        finally:
            await conn.close()
        actual = schema_text(dsn, pg_server.bin_dir)
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    expected = schema_path().read_text(encoding="utf-8")
    if actual != expected:
        pytest.fail("sql/schema.sql does not match the migrations: run `make schema` and commit the file.\n"
                    + short_diff(expected, actual), pytrace=False)


def test_the_schema_file_says_it_is_generated() -> None:
    text = schema_path().read_text(encoding="utf-8")
    assert text.startswith(HEADER) and "make schema" in HEADER and "source of truth" in HEADER


def test_the_migration_runner_skips_the_schema_file() -> None:
    migrations = [m.path.name for m in available_migrations()]
    assert schema_path().is_file() and schema_path().name not in migrations
    others = sorted(p.name for p in sql_dir().glob("*.sql") if p != schema_path())
    assert migrations == others, "every other .sql file in sql/ is a migration"


async def test_the_schema_file_alone_is_no_migration(conn: asyncpg.Connection, tmp_path: Path) -> None:
    """A folder with schema.sql and no numbered file has no migrations: migrate refuses rather
    than report the database up to date."""
    shutil.copy(schema_path(), tmp_path / schema_path().name)
    with pytest.raises(MigrationsMissing, match="no migration files found"):
        available_migrations(tmp_path)
    with pytest.raises(MigrationsMissing, match="no migration files found"):
        await migrate(conn, tmp_path)


def test_normalise_drops_what_varies_between_runs_and_keeps_the_objects() -> None:
    raw = "\n".join([
        "--", "-- PostgreSQL database dump", "--", "", r"\restrict AbC123", "",
        "-- Dumped from database version 18.6", "-- Dumped by pg_dump version 18.6", "",
        "SET statement_timeout = 0;", "SELECT pg_catalog.set_config('search_path', '', false);", "",
        "--", "-- Name: f(); Type: FUNCTION; Schema: public; Owner: -", "--", "",
        "CREATE FUNCTION public.f() RETURNS integer", "    LANGUAGE sql", "    SET enable_seqscan TO 'off'",
        "    AS $$ SELECT 1 $$;", "", "",
        "SET default_tablespace = '';", "",
        "--", "-- Name: t; Type: TABLE; Schema: public; Owner: -", "--", "",
        "CREATE TABLE public.t (", "    id integer", ");", "", "",
        "--", "-- PostgreSQL database dump complete", "--", "", r"\unrestrict AbC123", ""])
    assert normalise(raw) == "\n".join([
        "--", "-- Name: f(); Type: FUNCTION; Schema: public; Owner: -", "--", "",
        "CREATE FUNCTION public.f() RETURNS integer", "    LANGUAGE sql", "    SET enable_seqscan TO 'off'",
        "    AS $$ SELECT 1 $$;", "", "",
        "--", "-- Name: t; Type: TABLE; Schema: public; Owner: -", "--", "",
        "CREATE TABLE public.t (", "    id integer", ");", ""])
