"""The Python API for backends, `JobClient`: enqueue jobs and pipelines, read them, wait for
them, act on them.

    async with await JobClient.connect() as jobs:          # DATABASE_URL, or the embedded default
        job_id = await jobs.enqueue("echo", {"hello": "world"})
        record = await jobs.wait(job_id, timeout=30)       # completed, failed, cancelled, or waiting for approval
        pipeline_id = await jobs.create_pipeline([...JobCreate...])

What the console, the CLI and the HTTP API read besides (job details, statistics, workers,
bulk actions, schedules, tokens) is on `jobdesk.service.JobService`, which is a `JobClient` too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Self

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.core.plain_settings import load_settings
from jobdesk.service.actions import OperatorActions
from jobdesk.service.events import Events
from jobdesk.service.job_reads import JobLookups
from jobdesk.service.replica import ReadReplica
from jobdesk.service.schema import ensure_schema
from jobdesk.service.waiting import Waiting
from jobdesk.store.db import Database, create_pool

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings


class JobClient(Waiting, JobLookups, OperatorActions, Events):
    """Enqueue jobs and pipelines (`enqueue`, `enqueue_many`, `create_pipeline`), read them
    (`get_job`, `job_records`, `list_jobs`), wait for them (`wait`, `wait_many`, `run`), act
    on them (`cancel`, `retry`, `approve`, `reject`, ...) and emit the events durable
    processors wait for (`emit_event`), over one connection pool."""

    @classmethod
    async def connect(cls, database: Database | str | None = None, *, settings: Settings | None = None,
                      source: str = "api", pool_size: int | None = None, plan_each_call: bool = False,
                      indexes_only: bool = False, read_replica: bool = False) -> Self:
        """A client on `database` (a `Database`, a URL, or None for DATABASE_URL or else the
        embedded default), schema checked: the embedded database is migrated on the fly.

        `plan_each_call` (the console's) plans each statement for its call, and `indexes_only`
        (the HTTP API's) keeps its kept plans on the indexes: see `create_pool`.

        `read_replica` (the console's and the HTTP API's): its reads go to the database's
        DATABASE_READ_URL, when it has one, through a second pool (see `jobdesk.service.replica`)."""
        settings = settings or load_settings()
        if database is None:
            database = Database.resolve(settings)
        elif isinstance(database, str):
            database = Database.given(database, settings)
        size = pool_size or settings.DB_POOL_SIZE

        async def pool_on(dsn: str) -> asyncpg.Pool:
            return await create_pool(dsn, size=size, statement_timeout=settings.JOB_STATEMENT_TIMEOUT,
                                     application_name=f"jobdesk-{source}", plan_each_call=plan_each_call,
                                     indexes_only=indexes_only)

        pool = await pool_on(database.dsn)
        replica: ReadReplica | None = None
        try:
            async with pool.acquire() as conn:
                await ensure_schema(conn, embedded=database.embedded)
            if read_replica and database.read_url:
                replica = ReadReplica(await _replica_pool(pool_on, database.read_url), database.read_url)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, source=source, settings=settings, database=database, replica=replica)


async def _replica_pool(pool_on: Callable[[str], Awaitable[asyncpg.Pool]], dsn: str) -> asyncpg.Pool:
    """The read replica's pool; a replica that cannot be reached is named as DATABASE_READ_URL."""
    try:
        return await pool_on(dsn)
    except DatabaseUnavailable as exc:
        raise DatabaseUnavailable(f"DATABASE_READ_URL: {exc}") from exc


__all__ = ["JobClient", "ensure_schema"]
