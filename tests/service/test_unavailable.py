"""While PostgreSQL is away, the client says so in one line when it goes and one when it is back
(never a traceback per retry), and an enqueue that cannot be confirmed raises DatabaseUnavailable
saying whether the job may have been written (a private server, so the shared one stays up)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

import jobdesk
from jobdesk import DatabaseUnavailable, JobClient, JobdeskError
from jobdesk.embedded.server import EmbeddedServer
from jobdesk.service.jobs import migrate_database
from tests import pg


@pytest.fixture
async def private() -> AsyncIterator[EmbeddedServer]:
    server, root = pg.start_server()
    try:
        await migrate_database(server.dsn)
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_exported_beside_the_client() -> None:
    assert "DatabaseUnavailable" in jobdesk.__all__ and issubclass(DatabaseUnavailable, JobdeskError)


async def test_one_line_down_one_line_back(private: EmbeddedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with await JobClient.connect(private.dsn, pool_size=3) as client:
        await client.enqueue("echo", {})
        await asyncio.to_thread(private.stop)
        failures: list[BaseException] = []
        deadline = time.monotonic() + 8  # long enough for the pool's own retries (1, 2, 4 s)
        while time.monotonic() < deadline:
            try:
                await client.enqueue("echo", {})
            except Exception as exc:  # noqa: BLE001 - collected and checked below
                failures.append(exc)
            await asyncio.sleep(0.5)
        assert failures and all(isinstance(f, DatabaseUnavailable) for f in failures), failures
        assert all("was not written" in str(f) or "may or may not" in str(f) for f in failures)
        await asyncio.to_thread(private.ensure_running)
        deadline = time.monotonic() + 20
        while True:
            try:
                await client.enqueue("echo", {})
                break
            except DatabaseUnavailable:
                assert time.monotonic() < deadline, "the client did not reconnect"
                await asyncio.sleep(0.2)
    ours = [r for r in caplog.records if r.name == "jobdesk.db"]
    assert [r.getMessage().split(" is ")[1].split()[0] for r in ours] == ["unreachable", "reachable"], \
        [r.getMessage() for r in ours]
    assert not [r for r in caplog.records if r.exc_info], "no traceback while the database is away"


async def test_enqueue_lost_mid_write_may_or_may_not_be_written(private: EmbeddedServer) -> None:
    admin = await asyncpg.connect(private.dsn)
    try:
        # A job type whose insert waits for an advisory lock this connection holds, so that its
        # connection can be cut mid-write, however slow the machine: the insert cannot finish first.
        await admin.execute("""
            CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$;
            CREATE TRIGGER slow_insert BEFORE INSERT ON jobs FOR EACH ROW
              WHEN (NEW.type = 'slow') EXECUTE FUNCTION slow_insert();""")
        await admin.execute("SELECT pg_advisory_lock(4242)")
        async with await JobClient.connect(private.dsn, pool_size=2) as client:
            enqueue = asyncio.create_task(client.enqueue("slow", {}, unique_key="k1"))
            deadline = time.monotonic() + 20
            while not (blocked := await admin.fetchval(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted")):
                assert time.monotonic() < deadline, "the insert never reached the trigger"
                await asyncio.sleep(0.05)
            assert await admin.fetchval("SELECT pg_terminate_backend($1, 10000)", blocked)
            with pytest.raises(DatabaseUnavailable, match="may or may not have been written"):
                await enqueue
            await admin.execute("SELECT pg_advisory_unlock(4242)")
            # The retry with the same unique key is safe: one job, whether or not the first one was written.
            await admin.execute("DROP TRIGGER slow_insert ON jobs")
            first = await client.enqueue("slow", {}, unique_key="k1")
            again = await client.enqueue("slow", {}, unique_key="k1")
            assert first == again
            assert await admin.fetchval("SELECT count(*) FROM jobs WHERE unique_key = 'k1'") == 1
    finally:
        await admin.close()
