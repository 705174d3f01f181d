"""A large batch goes by COPY (`transitions.copy_in`): the rows are those the INSERT writes, column
for column; workers hear of them; a refused batch writes nothing, on the pool, on an application's
connection and behind PgBouncer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from jobdesk import JobClient, SyncJobClient
from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import JobCreate
from jobdesk.core.settings import load_settings
from jobdesk.store import transitions
from jobdesk.store.db import connect
from jobdesk.store.foreign import PsycopgConnection
from jobdesk.store.transitions import copy_in
from tests import pg
from tests.helpers import RecordsStarts, RunningWorker, wait_for
from tests.pgbouncer import PgBouncer

pytestmark = pytest.mark.timeout(120)

N = copy_in.COPY_MIN_JOBS + 100
PARENT = "parent-outside-the-batch"
NOW = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
LATER = datetime(2099, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


@pytest.fixture
async def other(template: str) -> AsyncIterator[asyncpg.Connection]:
    """A second fresh database, where the same jobs go by the other path."""
    url = await pg.create_test_database(template)
    connection = await connect(url)
    yield connection
    await connection.close()
    await pg.drop_test_database(url)


def plain_batch() -> list[JobCreate]:
    """Jobs as a bulk enqueue makes them: inputs, users, priorities and pipelines, no time."""
    inputs: list[dict[str, Any]] = [{}, {"n": 1}, {"text": "é ✓ 😀", "nested": {"list": [1, 2.5, None, True]}},
                                    {"quote": 'say "hi"'}]
    return [JobCreate(f"kind.{i % 3}", inputs[i % len(inputs)], id=f"p-{i:04d}",
                      user_id=(None, 1, 2)[i % 3], priority=(0, 5, -7, 2**31 - 1)[i % 4],
                      pipeline_id=f"pipe-{i % 5}" if i % 2 else None) for i in range(N)]


def awkward_batch() -> list[JobCreate]:
    """Values COPY's text format reads specially, start times, trace contexts and dependencies
    inside and outside the batch."""
    jobs = plain_batch()
    jobs[0].type = "tab\there, line\nthere, back\\slash\\N and \r"
    jobs[1].pipeline_id = "\\N"  # the text format's NULL, as a value
    jobs[2].input_data = {"a\tb": "c\\nd\n", "e": "\\N", "f": "\r\n"}
    jobs[3].scheduled_at = NOW  # in the past: runnable now
    jobs[4].scheduled_at = LATER  # waits
    jobs[5].trace_context = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    jobs[6].dependent_on_jobs = [PARENT]
    jobs[7].dependent_on_jobs = [jobs[6].id, PARENT]
    jobs[8].dependent_on_jobs = [jobs[7].id]
    jobs[9].id = 'a "quoted" \\ id\there'  # JSON escapes it in the list of its dependant
    jobs[10].dependent_on_jobs = [jobs[9].id]
    jobs[11].unique_key = "held"  # by the parent: a duplicate, standing for it
    jobs[12].unique_key = jobs[13].unique_key = "new\tkey"  # the second is a duplicate of the first
    jobs[14].dependent_on_jobs = [jobs[11].id, jobs[13].id]  # so it depends on their holders
    return jobs


def keyed_batch() -> list[JobCreate]:
    """Every job with a unique key of its own."""
    jobs = plain_batch()
    for i, job in enumerate(jobs):
        job.unique_key = f"key-{i}"
    return jobs


def awkward_untimed_batch() -> list[JobCreate]:
    """The awkward values without a time, a trace context or a unique key (the plain columns)."""
    jobs = awkward_batch()
    for job in jobs:
        job.scheduled_at = job.trace_context = job.unique_key = None
    jobs[14].dependent_on_jobs = [jobs[13].id]
    return jobs


async def prepare(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO users (id, name) VALUES (2, 'second')")
    await conn.execute("INSERT INTO jobs (id, type, input_data, unique_key) VALUES ($1, 'parent', '{}', 'held')",
                       PARENT)


async def table(conn: asyncpg.Connection, sql: str) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch(sql)]


async def written(conn: asyncpg.Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every column of every job, and every dependency edge. `created_at`, `updated_at` and
    `retain_from` are the transaction's time, another in each database: they are checked to be
    that one time."""
    jobs = await table(conn, "SELECT * FROM jobs ORDER BY seq")
    times = {(j["created_at"], j["updated_at"], j["retain_from"]) for j in jobs if j["id"] != PARENT}
    assert len(times) == 1 and len({*next(iter(times))}) == 1
    for job in jobs:
        del job["created_at"], job["updated_at"], job["retain_from"]
    return jobs, await table(conn, "SELECT * FROM job_dependencies ORDER BY job_id, depends_on_id")


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
@pytest.mark.parametrize("batch", [plain_batch, keyed_batch, awkward_batch, awkward_untimed_batch])
async def test_copy_writes_the_rows_the_insert_writes(batch: Any, driver: str, dsn: str, conn: asyncpg.Connection,
                                                      other: asyncpg.Connection,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """By COPY (on asyncpg, or on an application's psycopg connection) and by the INSERT, in two
    fresh databases: every column of every row, and every edge, the same."""
    import psycopg

    for db in (conn, other):
        await prepare(db)
    by_copy = batch()
    if driver == "asyncpg":
        assert copy_in.copies(conn, by_copy)
        async with conn.transaction():
            ids = await transitions.enqueue(conn, by_copy)
    else:
        async with await psycopg.AsyncConnection.connect(dsn) as pconn:
            writer = PsycopgConnection(pconn)
            assert copy_in.copies(writer, by_copy)
            ids = await transitions.enqueue(writer, by_copy)  # type: ignore[arg-type]
            await pconn.commit()
    monkeypatch.setattr(copy_in, "COPY_MIN_JOBS", N + 1)  # the same jobs, by the INSERT
    by_insert = batch()
    assert not copy_in.copies(other, by_insert)
    async with other.transaction():
        assert await transitions.enqueue(other, by_insert) == ids
    copied, inserted = await written(conn), await written(other)
    duplicates = sum(a != b.id for a, b in zip(ids, by_copy, strict=True))
    assert duplicates == (2 if batch is awkward_batch else 0)
    assert len(copied[0]) == N + 1 - duplicates
    for a, b in zip(copied[0], inserted[0], strict=True):
        assert {k: v for k, v in a.items() if b[k] != v} == {k: v for k, v in b.items() if a[k] != v}
    assert copied == inserted
    if batch in (awkward_batch, awkward_untimed_batch):
        assert copied[1], "the dependencies made their edges"
        assert copied[0][1]["type"] == "tab\there, line\nthere, back\\slash\\N and \r"
        assert copied[0][2]["pipeline_id"] == "\\N"
        assert copied[0][3]["input_data"] == {"a\tb": "c\\nd\n", "e": "\\N", "f": "\r\n"}


async def test_workers_hear_of_a_copied_batch(dsn: str, conn: asyncpg.Connection) -> None:
    """The insert's NOTIFY goes out at the commit: a worker that polls only every 30 s starts
    the jobs at once, and the ids are announced (as '*' for so many)."""
    heard: list[tuple[str, str]] = []
    listener = await asyncpg.connect(dsn)
    await listener.add_listener("jobdesk_new_jobs", lambda *a: heard.append((a[2], a[3])))
    await listener.add_listener("jobdesk_job_changes", lambda *a: heard.append((a[2], a[3])))
    starts = RecordsStarts()
    worker = RunningWorker(dsn, {"noop": starts}, JOB_PROCESSOR_POLL_INTERVAL=30)
    try:
        async with await JobClient.connect(dsn) as client:
            await asyncio.sleep(1)  # the worker's first claim has found nothing; it now waits
            enqueued = time.time()
            ids = await client.enqueue_many([JobCreate("noop", {"i": i}) for i in range(N)])

            async def all_started() -> bool:
                return len(starts.starts) == N

            await wait_for(all_started, timeout=25, what="every job started")
    finally:
        await worker.stop()
        await listener.close()
    assert set(starts.starts) == set(ids)
    assert min(starts.starts.values()) - enqueued < 10, "woken by the NOTIFY, not by the 30 s poll"
    # The new-jobs notice says how low the batch goes in the claim's walk (sql/031): priority 0.
    assert any(c == "jobdesk_new_jobs" and p.startswith("0:") for c, p in heard), heard
    assert ("jobdesk_job_changes", "*") in heard
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'completed'") == N


def with_one_bad(bad: dict[str, Any], at: int = N // 2) -> list[JobCreate]:
    jobs = [JobCreate("noop", {"i": i}) for i in range(N)]
    for name, value in bad.items():
        setattr(jobs[at], name, value)
    return jobs


@pytest.mark.parametrize(("bad", "field"), [
    ({"type": ""}, "type"),
    ({"type": "nul\x00type"}, "type"),
    ({"input_data": {"text": "nul \x00"}}, "input_data"),
    ({"input_data": {"text": "\ud800"}}, "input_data"),
    ({"input_data": ["not", "an", "object"]}, "input_data"),
    ({"priority": "high"}, "priority"),
    ({"priority": 2**31}, "priority"),
    ({"user_id": 99}, "user_id"),       # refused by the server, in the middle of the COPY
    ({"id": PARENT}, "id"),             # taken: refused by the server too
], ids=lambda v: str(v) if isinstance(v, str) else None)
async def test_a_refused_batch_writes_nothing(bad: dict[str, Any], field: str, dsn: str,
                                              conn: asyncpg.Connection) -> None:
    await prepare(conn)
    async with await JobClient.connect(dsn) as client:
        with pytest.raises(InvalidJob) as refused:
            await client.enqueue_many(with_one_bad(bad))
        assert refused.value.field == field
        app = await asyncpg.connect(dsn)  # in the application's transaction: it is the one to roll back
        try:
            with pytest.raises(InvalidJob):
                async with app.transaction():
                    await client.enqueue_many(with_one_bad(bad, at=N - 1), connection=app)
        finally:
            await app.close()
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 1  # the parent alone


async def test_on_the_application_connection(dsn: str, conn: asyncpg.Connection) -> None:
    """In the application's transaction the batch commits and rolls back with it, on asyncpg
    and on psycopg, async and sync; a refused one raises InvalidJob there too."""
    import psycopg

    app = await asyncpg.connect(dsn)
    async with await JobClient.connect(dsn) as client:
        try:
            async with app.transaction():
                kept = await client.enqueue_many([JobCreate("noop", {"k": i}) for i in range(N)], connection=app)
            tr = app.transaction()
            await tr.start()
            await client.enqueue_many([JobCreate("noop", {"gone": i}) for i in range(N)], connection=app)
            await tr.rollback()
        finally:
            await app.close()
        async with await psycopg.AsyncConnection.connect(dsn) as pconn:
            by_psycopg = await client.enqueue_many([JobCreate("noop", {"p": i}) for i in range(N)],
                                                   connection=pconn)
            await pconn.commit()
            with pytest.raises(InvalidJob, match="unknown user"):
                await client.enqueue_many(with_one_bad({"user_id": 99}), connection=pconn)
            await pconn.rollback()
    with SyncJobClient.connect(dsn) as sync_client, psycopg.connect(dsn) as sconn:
        by_sync = sync_client.enqueue_many([JobCreate("noop", {"s": i}) for i in range(N)], connection=sconn)
        sconn.commit()
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE input_data ? 'k'") == N
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE input_data ? 'gone'") == 0
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE input_data ? 'p'") == N
    rows = await conn.fetch("SELECT id FROM jobs WHERE input_data ? 'k' ORDER BY seq")
    assert [r["id"] for r in rows] == kept
    assert len(set(by_psycopg)) == len(set(by_sync)) == N
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE input_data ? 's'") == N
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 3 * N


async def test_behind_pgbouncer(dsn: str, conn: asyncpg.Connection, pgbouncer: PgBouncer) -> None:
    """Through a pooler in transaction mode, batch after batch (each may land on another server
    session), on the pool and on an application's connection."""
    pooled = pgbouncer.url(dsn, declared=False)
    async with await JobClient.connect(pooled) as client:
        for round_ in range(4):
            await client.enqueue_many([JobCreate("noop", {"round": round_}) for _ in range(N)])
        app = await asyncpg.connect(pooled, statement_cache_size=0)
        try:
            async with app.transaction():
                await client.enqueue_many([JobCreate("noop", {"round": "app"}) for _ in range(N)], connection=app)
        finally:
            await app.close()
        with pytest.raises(InvalidJob):
            await client.enqueue_many(with_one_bad({"user_id": 99}))
        await client.enqueue_many([JobCreate("noop", {"round": "after"}) for _ in range(N)])
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 6 * N


async def test_a_key_taken_during_the_copy_stands_for_its_job(dsn: str, conn: asyncpg.Connection) -> None:
    """A concurrent enqueue takes a key after the look-up of the holders: the COPY waits for
    it, fails on the key, and the enqueue starts again from the look-up, so the job of that
    key is the concurrent one's and every other job is written once."""
    rival, watcher = await connect(dsn), await connect(dsn)
    try:
        tx = rival.transaction()
        await tx.start()
        [held] = await transitions.enqueue(rival, [JobCreate("noop", {}, unique_key="contested")])
        jobs = [JobCreate("noop", {"i": i}, unique_key="contested" if i == 7 else f"free-{i}") for i in range(N)]
        assert copy_in.copies(conn, jobs)
        enqueueing = asyncio.ensure_future(transitions.enqueue(conn, jobs))

        async def waits_for_the_rival() -> bool:
            return bool(await watcher.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                               "AND query LIKE 'COPY%'"))

        await wait_for(waits_for_the_rival, timeout=20, what="the COPY waiting on the contested key")
        await tx.commit()
        ids = await asyncio.wait_for(enqueueing, 20)
    finally:
        await rival.close()
        await watcher.close()
    assert ids[7] == held and ids[:7] + ids[8:] == [j.id for j in jobs[:7] + jobs[8:]]
    assert await conn.fetchval("SELECT count(*) FROM jobs") == N
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE unique_key = 'contested'") == 1


async def test_a_copy_held_past_the_statement_timeout_is_cancelled_behind_pgbouncer(
        dsn: str, conn: asyncpg.Connection, pgbouncer: PgBouncer) -> None:
    """Behind a pooler the statement timeout is the client's: a COPY that waits past it is
    cancelled with PostgreSQL's own error for a statement timeout, as an INSERT is."""
    pooled = pgbouncer.url(dsn, declared=False)
    blocker = await asyncpg.connect(dsn)
    try:
        async with await JobClient.connect(pooled, settings=load_settings(DATABASE_URL=pooled,
                                                                          JOB_STATEMENT_TIMEOUT=1)) as client:
            async with blocker.transaction():
                await blocker.execute("LOCK TABLE jobs IN SHARE MODE")  # an insert waits for it
                with pytest.raises(asyncpg.QueryCanceledError, match="statement timeout"):
                    await client.enqueue_many([JobCreate("noop", {}) for _ in range(N)])
            await client.enqueue_many([JobCreate("noop", {}) for _ in range(N)])  # the pool is fine after it
    finally:
        await blocker.close()
    assert await conn.fetchval("SELECT count(*) FROM jobs") == N
