"""`make run` for the engine alone: the embedded database, a worker and the demo pipeline.

Everything runs in this one process (the database as its child), and Ctrl-C stops it all.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import sys

from jobdesk.cli.main import setup_logging
from jobdesk.core.errors import JobdeskError
from jobdesk.core.models import JobCreate
from jobdesk.core.settings import Settings, load_settings
from jobdesk.processors.demo_video import demo_pipeline
from jobdesk.runtime.registry import instantiate, load_processor_classes
from jobdesk.runtime.worker import Worker
from jobdesk.service.client import JobClient
from jobdesk.store.db import Database

log = logging.getLogger("jobdesk.dev")


async def seed_demo(settings: Settings) -> tuple[Database, JobCreate]:
    """The database (chosen here, started if embedded, migrated) with a fresh demo pipeline in it."""
    database = Database.resolve(settings)
    async with await JobClient.connect(database, settings=settings, source="cli", pool_size=2) as client:
        first = demo_pipeline()
        await client.enqueue_many([first])
    return database, first


async def prepare(settings: Settings) -> tuple[Database, JobCreate, Worker]:
    """The database with a fresh demo pipeline, and a worker for it."""
    database, first = await seed_demo(settings)
    processors = instantiate(load_processor_classes(settings.JOB_PROCESSOR_MODULES, settings.JOB_PROCESSOR_PATH))
    return database, first, Worker(settings, database.dsn, processors)


async def main() -> None:
    settings = load_settings()
    setup_logging(settings.LOG_LEVEL)
    database, first, worker = await prepare(settings)
    env = "" if not database.embedded else f"DATABASE_URL={shlex.quote(database.dsn)} "
    log.info("database: %s", database.describe())
    log.info("demo pipeline %s enqueued; watch it with: %s.venv/bin/jobdesk jobs --pipeline %s",
             first.pipeline_id, env, first.pipeline_id)
    log.info("the video stage waits for approval: %s.venv/bin/jobdesk approve ID (Ctrl-C stops everything)", env)
    worker.install_signal_handlers()
    await worker.run()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except JobdeskError as exc:
        print(f"jobdesk: error: {exc}", file=sys.stderr)
        sys.exit(1)
