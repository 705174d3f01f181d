"""The one typed service every front door uses: the CLI, the console, the HTTP API and Python
backends read and act through `JobService`, and none of them writes SQL of its own.

    async with await JobService.connect(source="cli") as jobs:
        job_id = await jobs.enqueue("echo", {"hello": "world"})
        detail = await jobs.job_detail(job_id)

A service holds a pool and an actor (who acts, for the audit log). `as_actor` gives a view on the
same pool for another actor, optionally restricted to one user's jobs: an HTTP request made with
a user's token sees and acts on that user's jobs only, and another user's job is "not found".

`JobService` is one class put together from parts, one module each: `base` (the pool, the actor,
the user scope), `enqueue`, `job_reads`, `pipelines`, `actions`, `bulk`, `fleet`, `schedules`,
`stats` and `tokens`; its read models are in `read_models`, the schema checks in `schema`.
"""

from __future__ import annotations

from worker.core.settings import Settings, load_settings
from worker.service.actions import OperatorActions
from worker.service.bulk import BulkActions
from worker.service.enqueue import Enqueueing
from worker.service.fleet import FleetControl
from worker.service.pipelines import PipelineReads
from worker.service.read_models import (
    BULK_COUNT_CAP,
    Attempt,
    BulkCount,
    BulkResult,
    Enqueued,
    JobDetail,
    PipelineSteps,
    Submitted,
    WorkersView,
)
from worker.service.schedules import ScheduleControl
from worker.service.schema import ensure_schema, migrate_database, prepare_schema
from worker.service.stats import StatsReads
from worker.service.tokens import TokenStore
from worker.store.db import Database, create_pool


class JobService(Enqueueing, StatsReads, PipelineReads, OperatorActions, BulkActions, FleetControl,
                 ScheduleControl, TokenStore):
    """Reads and actions on jobs, pipelines and workers, over one pool."""

    @classmethod
    async def connect(cls, database: Database | str | None = None, *, settings: Settings | None = None,
                      source: str = "api", pool_size: int | None = None, plan_each_call: bool = False,
                      indexes_only: bool = False) -> JobService:
        """A service on `database` (a `Database`, a URL, or None for DATABASE_URL or else the
        embedded default), schema checked: the embedded database is migrated on the fly.

        `plan_each_call` (the console's) plans each statement for its call, and `indexes_only`
        (the HTTP API's) keeps its kept plans on the indexes: see `create_pool`."""
        settings = settings or load_settings()
        if database is None:
            database = Database.resolve(settings)
        elif isinstance(database, str):
            database = Database.given(database, settings)
        pool = await create_pool(database.dsn, size=pool_size or settings.DB_POOL_SIZE,
                                 statement_timeout=settings.JOB_STATEMENT_TIMEOUT,
                                 application_name=f"jobdesk-{source}", plan_each_call=plan_each_call,
                                 indexes_only=indexes_only)
        try:
            async with pool.acquire() as conn:
                await ensure_schema(conn, embedded=database.embedded)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, source=source, settings=settings)


__all__ = ["BULK_COUNT_CAP", "Attempt", "BulkCount", "BulkResult", "Enqueued", "JobDetail", "JobService",
           "PipelineSteps", "Submitted", "WorkersView", "ensure_schema", "migrate_database", "prepare_schema"]
