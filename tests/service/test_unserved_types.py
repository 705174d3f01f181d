"""A job whose type no live worker serves is enqueued, with a warning: the Python client logs it
once per type, while live workers serve other types only (jobdesk.service.served_types)."""

from __future__ import annotations

import logging

import asyncpg
import pytest

from jobdesk import JobClient, JobCreate, SyncJobClient
from jobdesk.core.settings import load_settings
from jobdesk.store.fleet import register


async def live_worker(conn: asyncpg.Connection, *types: str, worker_id: str = "w-1") -> None:
    """A live worker's row, as a worker registers it at start."""
    await register(conn, worker_id, "host", 1, 1, list(types), "test")


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "jobdesk.client" and r.levelno == logging.WARNING]


async def test_the_client_warns_once_per_type_no_live_worker_serves(dsn: str, conn: asyncpg.Connection,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    async with await JobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2) as jobs:
        await jobs.enqueue("crnch", {})
        assert warnings_of(caplog) == [], "no live worker at all: workers are not started yet"
    await live_worker(conn, "crunch", "echo")
    async with await JobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2) as jobs:
        await jobs.enqueue("crnch", {})
        await jobs.enqueue("crnch", {})
        await jobs.enqueue("crunch", {})
        await jobs.enqueue_many([JobCreate("crnch", {}), JobCreate("other", {}), JobCreate("echo", {})])
    assert warnings_of(caplog) == [
        "no live worker serves crnch (did you mean crunch?); its jobs wait until a worker that serves it starts",
        "no live worker serves other; its jobs wait until a worker that serves it starts"]
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'crnch'") == 4, "enqueued all the same"


async def test_the_sync_client_warns_too(dsn: str, conn: asyncpg.Connection,
                                         caplog: pytest.LogCaptureFixture) -> None:
    await live_worker(conn, "crunch")
    with SyncJobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2) as jobs:
        jobs.enqueue("crnch", {})
        jobs.enqueue("crnch", {})
    assert len(warnings_of(caplog)) == 1 and "no live worker serves crnch" in warnings_of(caplog)[0]


async def test_a_worker_whose_lease_ran_out_is_not_live(dsn: str, conn: asyncpg.Connection) -> None:
    await live_worker(conn, "crunch")
    await live_worker(conn, "crnch", worker_id="w-2")
    await conn.execute("UPDATE workers SET heartbeat_at = now() - interval '1 hour' WHERE id = 'w-2'")
    async with await JobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2) as jobs:
        warnings = await jobs.unserved_warnings(["crnch", "crunch"])
    assert list(warnings) == ["crnch"]
