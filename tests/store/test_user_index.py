"""jobs_user_ready_idx exists only once some type's claims walk users (fair share, per-user
limits): every other enqueue skips its entry (migration 042, jobdesk.store.user_index)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from jobdesk.store import user_index
from jobdesk.store.db import connect
from jobdesk.store.migrations import migrate
from tests import pg
from tests.helpers import flow_workers
from tests.pgbouncer import PgBouncer


@pytest.fixture
async def empty_dsn(template: str) -> AsyncIterator[str]:
    url = await pg.create_empty_database(template)
    yield url
    await pg.drop_test_database(url)


async def test_a_database_without_per_user_flow_control_has_none(conn: asyncpg.Connection) -> None:
    assert await user_index.state(conn) == "missing"
    await conn.execute("INSERT INTO jobs (type, input_data) VALUES ('t', '{}')")
    names = {r["indexrelid"] for r in await conn.fetch(
        "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'jobs_live'::regclass")}
    assert not {n for n in names if "user" in n}, names


async def test_ensure_builds_it_once_and_again_when_a_build_died(dsn: str, conn: asyncpg.Connection) -> None:
    assert await user_index.ensure(dsn) is True
    assert await user_index.state(conn) == "ready"
    assert await user_index.ensure(dsn) is False
    await conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1::regclass", user_index.INDEX)
    assert await user_index.state(conn) == "invalid"
    assert await user_index.ensure(dsn) is True
    assert await user_index.state(conn) == "ready"
    definition = await conn.fetchval("SELECT pg_get_indexdef($1::regclass)", user_index.INDEX)
    assert "ON public.jobs_live USING btree (type, priority DESC, COALESCE(user_id, 0), seq)" in definition
    assert "WHERE" in definition and "run_at IS NULL" in definition


async def test_builders_at_once_build_it_once(dsn: str, conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 't', '{}' FROM generate_series(1, 20000)")
    built = await asyncio.gather(*(user_index.ensure(dsn) for _ in range(3)))
    assert sorted(built) == [False, False, True]
    assert await user_index.state(conn) == "ready"


async def test_behind_a_pooler_it_is_built_without_a_session_lock(dsn: str, conn: asyncpg.Connection,
                                                                 pgbouncer: PgBouncer) -> None:
    pooled = pgbouncer.url(dsn, declared=False)
    assert await user_index.ensure(pooled) is True
    assert await user_index.state(conn) == "ready"
    assert await user_index.ensure(pooled) is False
    assert not await conn.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")


def test_a_worker_with_fair_share_builds_it(dsn: str, tmp_path: Path) -> None:
    async def state() -> str:
        conn = await connect(dsn)
        try:
            return await user_index.state(conn)
        finally:
            await conn.close()

    assert asyncio.run(state()) == "missing"
    with flow_workers(dsn, tmp_path, 1, JOB_FAIR_SHARE="flow.fair"):
        deadline = time.monotonic() + 30
        while asyncio.run(state()) != "ready":
            assert time.monotonic() < deadline, (tmp_path / "worker-0.log").read_text()
            time.sleep(0.2)


@pytest.mark.parametrize("flow", ["fair_share", "user_max_running", "user_rate"])
async def test_the_migration_keeps_it_where_a_type_walks_users(empty_dsn: str, flow: str) -> None:
    conn = await connect(empty_dsn)
    try:
        await migrate(conn, below=42)
        assert await user_index.state(conn) == "ready", "sql/022 made it for every database"
        values = {"fair_share": "fair_share = true", "user_max_running": "user_max_running = 2",
                  "user_rate": "user_rate_max = 5, user_rate_period = '1 second'"}[flow]
        await conn.execute(f"INSERT INTO flow_limits (type) VALUES ('x'), ('y'); UPDATE flow_limits SET {values} "
                           "WHERE type = 'y'")
        await migrate(conn)
        assert await user_index.state(conn) == "ready"
    finally:
        await conn.close()


async def test_the_migration_drops_it_where_no_type_walks_users(empty_dsn: str) -> None:
    conn = await connect(empty_dsn)
    try:
        await migrate(conn, below=42)
        await conn.execute("INSERT INTO flow_limits (type, rate_max, rate_period) VALUES ('x', 5, '1 second')")
        await migrate(conn)
        assert await user_index.state(conn) == "missing"
    finally:
        await conn.close()
