"""The HTTP API's group commit of enqueues sends its notifications after its commit, in a
transaction of their own (sql/032): its commit, which flushes, holds no notification lock.
Listeners hear the same as from the insert trigger; every other insert still notifies at commit."""

from __future__ import annotations

import asyncio

import asyncpg

from jobdesk.core.models import JobCreate
from jobdesk.core.rules import Actor
from jobdesk.store import transitions
from jobdesk.store.db import connect
from jobdesk.store.listener import JOB_CHANGES_CHANNEL, NEW_JOBS_CHANNEL

ACTOR = Actor("api", "tester", "token-a")


class Heard:
    """What a LISTEN connection hears on both channels."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []
        self.news = asyncio.Event()

    def __call__(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        self.said.append((channel, payload))
        self.news.set()

    async def after(self, seconds: float) -> list[tuple[str, str]]:
        await asyncio.sleep(seconds)
        said, self.said = self.said, []
        return said


async def listening(dsn: str) -> tuple[asyncpg.Connection, Heard]:
    conn = await connect(dsn)
    heard = Heard()
    for channel in (JOB_CHANGES_CHANNEL, NEW_JOBS_CHANNEL):
        await conn.add_listener(channel, heard)
    return conn, heard


async def test_group_commit_notifies_after_its_commit_what_the_trigger_would(dsn: str,
                                                                              conn: asyncpg.Connection) -> None:
    listener, heard = await listening(dsn)
    try:
        jobs = [JobCreate("echo", {"n": i}) for i in range(3)]
        rows = await transitions.enqueue_audited(conn, [(ACTOR, job) for job in jobs], "ins.type")
        assert set(rows) == {job.id for job in jobs}
        assert await conn.fetchval("SELECT count(*) FROM jobs") == 3, "committed by the statement"
        assert await heard.after(0.3) == [], "the commit sent no notification"
        seqs = [await conn.fetchval("SELECT seq FROM jobs WHERE id = $1", job.id) for job in jobs]
        await transitions.notify_inserted(conn, rows)
        said = await heard.after(0.3)
        assert sorted(said) == sorted([(JOB_CHANGES_CHANNEL, ",".join(job.id for job in jobs)),
                                       (NEW_JOBS_CHANNEL, f"0:{min(seqs)}")]), "as the insert trigger says it"
        assert await conn.fetchval("SELECT current_setting('jobdesk.notify_after_commit', true)") in (None, ""), \
            "the setting was local to the statement's transaction"

        # Any other insert on the same connection notifies at its commit, as before.
        await transitions.enqueue(conn, [JobCreate("echo", {})])
        said = await heard.after(0.3)
        assert [channel for channel, _ in said].count(NEW_JOBS_CHANNEL) == 1
        assert [channel for channel, _ in said].count(JOB_CHANGES_CHANNEL) == 1
    finally:
        await listener.close()


async def test_past_150_jobs_the_notice_says_star(dsn: str, conn: asyncpg.Connection) -> None:
    listener, heard = await listening(dsn)
    try:
        jobs = [JobCreate("echo", {}, priority=i % 3) for i in range(151)]
        rows = await transitions.enqueue_audited(conn, [(ACTOR, job) for job in jobs], "ins.type")
        low = await conn.fetchval("SELECT min(seq) FROM jobs")
        await transitions.notify_inserted(conn, rows)
        assert sorted(await heard.after(0.3)) == [(JOB_CHANGES_CHANNEL, "*"), (NEW_JOBS_CHANNEL, f"2:{low}")]
    finally:
        await listener.close()


async def test_a_worker_hears_of_jobs_enqueued_through_the_api_at_once(dsn: str) -> None:
    """End to end: the jobs of POST /api/jobs wake a listening worker (no wait for its poll)."""
    from jobdesk.service.jobs import JobService

    listener, heard = await listening(dsn)
    service = await JobService.connect(dsn, pool_size=2)
    try:
        [done] = await service.enqueue_batch([(ACTOR, JobCreate("echo", {"x": 1}))])
        await asyncio.wait_for(heard.news.wait(), timeout=5)
        said = await heard.after(0.2)
        assert any(channel == NEW_JOBS_CHANNEL and payload.startswith("0:") for channel, payload in said)
        assert any(channel == JOB_CHANGES_CHANNEL and done.id in payload.split(",") for channel, payload in said)
    finally:
        await service.close()
        await listener.close()
