"""Enqueue in the application's own transaction, on each driver: the job exists if and only if
that transaction commits, and a committed one is picked up by a worker at once (the NOTIFY goes
out at the commit); behind PgBouncer in transaction mode too."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import asyncpg
import pytest

from jobdesk import JobClient, SyncJobClient
from jobdesk.store.transitions.copy_in import COPY_MIN_JOBS
from tests.helpers import RecordsStarts, RunningWorker
from tests.integrations.app_drivers import DRIVERS, ORDERS, Driver
from tests.pgbouncer import PgBouncer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def client(dsn: str, conn: asyncpg.Connection) -> AsyncIterator[JobClient]:
    await conn.execute(ORDERS)
    async with await JobClient.connect(dsn) as jobs:
        yield jobs


@pytest.fixture
def sync_clients(dsn: str) -> Iterator[list[SyncJobClient]]:
    made: list[SyncJobClient] = []
    yield made
    for one in made:
        one.close()


def _sync_on(dsn: str, made: list[SyncJobClient]) -> Callable[[], SyncJobClient]:
    def make() -> SyncJobClient:
        made.append(SyncJobClient.connect(dsn))
        return made[-1]
    return make


async def _saved(conn: asyncpg.Connection, order: str) -> tuple[int, int]:
    """(orders saved, jobs enqueued) for this order."""
    return (await conn.fetchval("SELECT count(*) FROM orders WHERE id = $1", order),
            await conn.fetchval("SELECT count(*) FROM jobs WHERE input_data->>'order' = $1", order))


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
async def test_commit_runs_the_job(driver: Driver, dsn: str, conn: asyncpg.Connection, client: JobClient,
                                   sync_clients: list[SyncJobClient]) -> None:
    starts = RecordsStarts()
    worker = RunningWorker(dsn, {"confirm": starts}, JOB_PROCESSOR_POLL_INTERVAL=30)  # only a NOTIFY wakes it soon
    try:
        job_id = await driver.transact(client, _sync_on(dsn, sync_clients), dsn, "o-1", "commit")
        record = await client.wait(job_id, timeout=20)
    finally:
        await worker.stop()
    assert record.status == "completed"
    assert job_id in starts.starts
    assert await _saved(conn, "o-1") == (1, 1)


@pytest.mark.parametrize("outcome", ["rollback", "raise"])
@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
async def test_rollback_leaves_nothing(driver: Driver, outcome: str, dsn: str, conn: asyncpg.Connection,
                                       client: JobClient, sync_clients: list[SyncJobClient]) -> None:
    job_id = await driver.transact(client, _sync_on(dsn, sync_clients), dsn, "o-2", outcome)
    assert job_id  # the enqueue answered with the id of a job that was never committed
    assert await _saved(conn, "o-2") == (0, 0)
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
async def test_behind_pgbouncer_in_transaction_mode(driver: Driver, dsn: str, conn: asyncpg.Connection,
                                                    client: JobClient, pgbouncer: PgBouncer,
                                                    sync_clients: list[SyncJobClient]) -> None:
    pooled = pgbouncer.url(dsn, declared=False)
    # Several transactions in a row: a named prepared statement left on a server session would
    # break a later one that lands there.
    for n in range(6):
        await driver.transact(client, _sync_on(dsn, sync_clients), pooled, f"b-{n}", "commit")
    await driver.transact(client, _sync_on(dsn, sync_clients), pooled, "b-x", "rollback")
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'confirm'") == 6
    assert await _saved(conn, "b-x") == (0, 0)


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
async def test_a_large_batch_goes_with_the_application_transaction(driver: Driver, dsn: str, conn: asyncpg.Connection,
                                                                   client: JobClient, pgbouncer: PgBouncer,
                                                                   sync_clients: list[SyncJobClient]) -> None:
    """A batch large enough for COPY (`transitions.copy_in`) commits and rolls back with the
    application's transaction on every driver, directly and behind PgBouncer."""
    batch = COPY_MIN_JOBS + 50
    pooled = pgbouncer.url(dsn, declared=False)
    make = _sync_on(dsn, sync_clients)
    for url, tag in ((dsn, "direct"), (pooled, "pooled")):
        kept = await driver.transact(client, make, url, f"big-{tag}", "commit", batch)
        await driver.transact(client, make, url, f"gone-{tag}", "rollback", batch)
        await driver.transact(client, make, url, f"raised-{tag}", "raise", batch)
        assert await _saved(conn, f"big-{tag}") == (1, batch)
        assert kept == await conn.fetchval("SELECT id FROM jobs WHERE input_data = $1",
                                           {"order": f"big-{tag}", "part": 0})
        for gone in ("gone", "raised"):
            assert await _saved(conn, f"{gone}-{tag}") == (0, 0)


async def test_unique_keys_in_the_application_transaction(dsn: str, conn: asyncpg.Connection,
                                                          client: JobClient) -> None:
    """A unique key held in the same transaction answers with the holder's id (the key's look-up
    runs in a savepoint of the application's transaction), and nothing stays after a rollback."""
    import psycopg

    app = await asyncpg.connect(dsn)
    try:
        async with app.transaction():
            first = await client.enqueue("confirm", {"n": 1}, unique_key="k1", connection=app)
            again = await client.enqueue("confirm", {"n": 2}, unique_key="k1", connection=app)
        await app.execute("BEGIN")  # a transaction begun by hand, not by asyncpg's transaction()
        manual = await client.enqueue("confirm", {"n": 3}, unique_key="k3", connection=app)
        await app.execute("ROLLBACK")
    finally:
        await app.close()
    assert first == again
    async with await psycopg.AsyncConnection.connect(dsn) as pconn:
        held = await client.enqueue("confirm", {"n": 4}, unique_key="k1", connection=pconn)
        fresh = await client.enqueue("confirm", {"n": 5}, unique_key="k2", connection=pconn)
        await pconn.rollback()
    assert held == first
    assert fresh != first and manual
    rows = await conn.fetch("SELECT unique_key FROM jobs ORDER BY unique_key")
    assert [r["unique_key"] for r in rows] == ["k1"]
