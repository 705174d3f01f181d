"""Enqueueing jobs and pipelines as a backend does: one job, jobs atomically in a group, a pipeline.
The HTTP API's ways (audited submissions, idempotency keys, group commit) are in `submissions`."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, cast

import asyncpg

from jobdesk.core import tracing
from jobdesk.core.models import JobCreate
from jobdesk.service.access import writes
from jobdesk.service.base import WRITE_FAILURES, ServiceBase
from jobdesk.service.foreign import async_writer
from jobdesk.store import transitions
from jobdesk.store.foreign import enqueue_scope

log = logging.getLogger("jobdesk.client")


class Enqueueing(ServiceBase):
    """Enqueueing jobs and pipelines."""

    async def enqueue(self, type: str, input_data: dict[str, Any], *, depends_on: Sequence[str] = (),
                      user_id: int | None = None, pipeline_id: str | None = None, priority: int = 0,
                      id: str | None = None, scheduled_at: datetime | None = None,
                      unique_key: str | None = None, debounce: float | None = None,
                      debounce_max: float | None = None, connection: object | None = None) -> str:
        """Enqueue one job; return its id (that of the unfinished job holding `unique_key`, if one does).

        With `connection` (the application's own asyncpg connection, psycopg `AsyncConnection` or
        SQLAlchemy `AsyncSession`), the job is written through it, in its transaction: it exists
        if and only if that transaction commits, and workers hear of it at the commit.

        With `debounce` (seconds; needs `unique_key`), a queued job holding the key that has not
        started takes this `input_data` instead, and starts `debounce` seconds from now, but no
        later than `debounce_max` seconds after its first enqueue (see `place`).

        A type that no live worker serves, while live workers serve others, is enqueued all the
        same, and logged as a warning on `jobdesk.client`, once per type (`unserved_warnings`)."""
        job = JobCreate(type, input_data, dependent_on_jobs=list(depends_on), user_id=user_id,
                        pipeline_id=pipeline_id, priority=priority, scheduled_at=scheduled_at,
                        unique_key=unique_key, debounce=debounce, debounce_max=debounce_max)
        if id is not None:
            job.id = id
        job_id = (await self.place(job, connection=connection))[0]
        await self._warn_unserved([type])
        return job_id

    @writes
    async def place(self, job: JobCreate, *, connection: object | None = None) -> tuple[str, str]:
        """Enqueue one job; return the id that stands for it and what happened: `created`,
        `duplicate` (an unfinished job holds its unique key; nothing changed) or `debounced`
        (the queued job holding its key took its input and its new start)."""
        if self.user_id is not None:
            job.user_id = self.user_id
        debounced: set[str] = set()
        with tracing.enqueueing([job]):
            job_id, dup = await self._place(job, debounced, connection)
        return job_id, "debounced" if debounced else "duplicate" if dup else "created"

    async def _place(self, job: JobCreate, debounced: set[str], connection: object | None) -> tuple[str, bool]:
        async with self._writing("the job", connection) as conn:
            if self.user_id is not None:
                await self._check_visible(conn, list(job.dependent_on_jobs))
            [(job_id, dup)] = await transitions.enqueue_detailed(conn, [job], debounced)
        return job_id, dup

    @asynccontextmanager
    async def _writing(self, what: str, connection: object | None = None) -> AsyncIterator[asyncpg.Connection]:
        """A connection in a transaction, for an enqueue: DatabaseUnavailable, saying whether
        `what` may have been written, when the database cannot be reached or is lost before
        the commit is confirmed.

        With `connection`, the application's: the enqueue runs in its transaction (or in a
        transaction of its own when it has none open), and its errors are the application's
        driver's, as any statement of its own would meet."""
        if connection is not None:
            writer = await async_writer(connection)
            async with enqueue_scope(writer):
                # The statements use the part of asyncpg's connection the writer has.
                yield cast(asyncpg.Connection, writer)
            return
        reached = False
        try:
            async with self.pool.acquire() as conn:
                reached = True
                async with conn.transaction():
                    yield conn
        except WRITE_FAILURES as exc:
            raise await self._write_failed(exc, reached=reached, what=what) from exc

    @writes
    async def enqueue_many(self, jobs: Sequence[JobCreate], *, connection: object | None = None) -> list[str]:
        """Enqueue jobs (which may depend on each other) atomically; return their ids.
        `connection`: as `enqueue`'s, the application's, whose transaction they commit with.

        DatabaseUnavailable when the database cannot be reached, or is lost before the commit
        is confirmed: then the jobs may or may not have been written, and a retry is safe only
        for jobs that carry a `unique_key` (or, over HTTP, an idempotency key)."""
        if self.user_id is not None:
            for job in jobs:
                job.user_id = self.user_id
        with tracing.enqueueing(jobs):
            async with self._writing("the job" if len(jobs) == 1 else "the jobs", connection) as conn:
                if self.user_id is not None:
                    batch = {x.id for x in jobs}  # made once: per dependency, it made the batch quadratic
                    await self._check_visible(conn, [d for j in jobs for d in j.dependent_on_jobs if d not in batch])
                ids = await transitions.enqueue(conn, jobs)
        await self._warn_unserved(job.type for job in jobs)
        return ids

    async def unserved_warnings(self, job_types: Iterable[str]) -> dict[str, str]:
        """The warning of each of `job_types` that no live worker serves, when live workers serve
        other types: a job of that type waits until a worker that serves it starts (a typo in the
        type, or a worker started without its processor). Read from what the live workers serve
        as last read, at most SERVED_TTL_S ago; no statement of its own in between."""
        return await self.served_types.warnings(self.pool, self.settings.JOB_LEASE_TIMEOUT, job_types)

    async def _warn_unserved(self, job_types: Iterable[str]) -> None:
        """Log `unserved_warnings`, once per type for this client (and its views)."""
        warned = self.served_types.warned
        fresh = [t for t in dict.fromkeys(job_types) if t not in warned]
        if fresh:
            for job_type, warning in (await self.unserved_warnings(fresh)).items():
                warned.add(job_type)
                log.warning("%s", warning)

    @writes
    async def create_pipeline(self, jobs: Sequence[JobCreate], *, pipeline_id: str | None = None,
                              connection: object | None = None) -> str:
        """Enqueue a DAG of jobs as one pipeline; return the pipeline id. `connection`: as `enqueue`'s."""
        pid = pipeline_id or str(uuid.uuid4())
        for job in jobs:
            job.pipeline_id = pid
        await self.enqueue_many(jobs, connection=connection)
        return pid
