"""The Python API for backends: enqueue jobs and pipelines, read them, act on them.

    async with await JobClient.connect() as jobs:          # DATABASE_URL, or the embedded default
        job_id = await jobs.enqueue("echo", {"hello": "world"})
        pipeline_id = await jobs.create_pipeline([...JobCreate...])
        record = await jobs.get_job(job_id)
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import asyncpg

from worker import transitions
from worker.db import create_pool, resolve_target
from worker.errors import DatabaseUnavailable, JobNotFound
from worker.migrations import migrate, pending_migrations
from worker.models import JobCreate, JobRecord, Status
from worker.settings import Settings, load_settings


async def ensure_schema(conn: asyncpg.Connection, *, embedded: bool) -> None:
    """Migrate the embedded database on the fly; ask for `jobdesk migrate` anywhere else."""
    if embedded:
        await migrate(conn)
        return
    pending = await pending_migrations(conn)
    if pending:
        first = pending[0]
        raise DatabaseUnavailable(f"the database schema is not up to date ({len(pending)} migration(s) "
                                  f"pending, from {first.version:03d}_{first.name}); run `jobdesk migrate`")


class JobClient:
    """A pool plus the operations backends, the CLI and the console share."""

    def __init__(self, pool: asyncpg.Pool, *, source: str = "api") -> None:
        self.pool = pool
        self.actor = transitions.Actor.current(source)

    @classmethod
    async def connect(cls, dsn: str | None = None, *, settings: Settings | None = None,
                      source: str = "api", pool_size: int | None = None) -> JobClient:
        settings = settings or load_settings()
        if dsn is None:
            target = resolve_target(settings)
            dsn, embedded = target.dsn, target.embedded
        else:
            embedded = False
        timeout_ms = str(int(settings.JOB_STATEMENT_TIMEOUT * 1000))
        pool = await create_pool(dsn, size=pool_size or settings.DB_POOL_SIZE,
                                 server_settings={"statement_timeout": timeout_ms,
                                                  "application_name": f"jobdesk-{source}"})
        try:
            async with pool.acquire() as conn:
                await ensure_schema(conn, embedded=embedded)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, source=source)

    async def close(self) -> None:
        await self.pool.close()

    async def __aenter__(self) -> JobClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- enqueue ----------------------------------------------------------------------------

    async def enqueue(self, type: str, input_data: dict[str, Any], *, depends_on: Sequence[str] = (),
                      user_id: int | None = None, pipeline_id: str | None = None, priority: int = 0,
                      id: str | None = None) -> str:
        """Enqueue one job; return its id."""
        job = JobCreate(type, input_data, dependent_on_jobs=list(depends_on), user_id=user_id,
                        pipeline_id=pipeline_id, priority=priority)
        if id is not None:
            job.id = id
        return (await self.enqueue_many([job]))[0]

    async def enqueue_many(self, jobs: Sequence[JobCreate]) -> list[str]:
        """Enqueue jobs (which may depend on each other) atomically; return their ids."""
        async with self.pool.acquire() as conn, conn.transaction():
            return await transitions.enqueue(conn, jobs)

    async def create_pipeline(self, jobs: Sequence[JobCreate], *, pipeline_id: str | None = None) -> str:
        """Enqueue a DAG of jobs as one pipeline; return the pipeline id."""
        pid = pipeline_id or str(uuid.uuid4())
        for job in jobs:
            job.pipeline_id = pid
        await self.enqueue_many(jobs)
        return pid

    # -- read -------------------------------------------------------------------------------

    async def get_job(self, job_id: str) -> JobRecord:
        row = await self.pool.fetchrow(f"SELECT {JobRecord.COLUMNS} FROM jobs WHERE id = $1", job_id)
        if row is None:
            raise JobNotFound(f"no job with id {job_id}")
        return JobRecord.from_row(row)

    async def list_jobs(self, *, status: Status | str | None = None, type: str | None = None,
                        pipeline_id: str | None = None, limit: int = 50) -> list[JobRecord]:
        """Newest first."""
        rows = await self.pool.fetch(
            f"""SELECT {JobRecord.COLUMNS} FROM jobs
                 WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR type = $2)
                   AND ($3::text IS NULL OR pipeline_id = $3)
                 ORDER BY seq DESC LIMIT $4""",
            str(status) if status else None, type, pipeline_id, limit)
        return [JobRecord.from_row(r) for r in rows]

    async def attempts(self, job_id: str) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "SELECT attempt, worker_id, started_at, finished_at, outcome, error_message, traceback "
            "FROM job_attempts WHERE job_id = $1 ORDER BY attempt, id", job_id)
        return [dict(r) for r in rows]

    async def dependants(self, job_id: str) -> list[str]:
        rows = await self.pool.fetch("SELECT job_id FROM job_dependencies WHERE depends_on_id = $1 "
                                     "ORDER BY job_id", job_id)
        return [r["job_id"] for r in rows]

    # -- operator actions -------------------------------------------------------------------

    async def cancel(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            return await transitions.cancel(conn, job_ids, self.actor)

    async def retry(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            return await transitions.retry(conn, job_ids, self.actor)

    async def approve(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            return await transitions.approve(conn, job_ids, self.actor)

    async def reject(self, job_ids: Sequence[str], reason: str) -> list[str]:
        async with self.pool.acquire() as conn:
            return await transitions.reject(conn, job_ids, reason, self.actor)

    async def retry_plan(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        """What `retry_downstream` would touch, without changing anything."""
        async with self.pool.acquire() as conn:
            return [dict(r) for r in await transitions.retry_plan(conn, job_ids)]

    async def retry_downstream(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            return await transitions.retry_downstream(conn, job_ids, self.actor)

    async def cancel_pipeline(self, pipeline_id: str) -> list[str]:
        async with self.pool.acquire() as conn:
            return await transitions.cancel_pipeline(conn, pipeline_id, self.actor)
