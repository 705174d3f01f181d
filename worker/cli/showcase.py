"""Demo states for `make screenshots`: the demo pipelines and a few failing jobs run through a
real worker, one approval and one rejection go through the service as an operator's would, a
worker keeps two long jobs running while the pictures are taken, and a small fleet of other
workers (busy, paused, draining, lost) sits beside it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

from jobdesk.core.models import Job, JobCreate, ProcessorResult, Status
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.schedules import Schedule
from jobdesk.core.settings import Settings, load_settings
from jobdesk.processors.builtin import PROCESSOR_MAP as BUILTIN
from jobdesk.processors.demo_video import PROCESSOR_MAP as DEMO
from jobdesk.processors.demo_video import demo_pipeline
from jobdesk.runtime.worker import Worker
from jobdesk.service.jobs import JobService
from jobdesk.store import fleet, transitions
from jobdesk.store import rollup as stats_rollup
from jobdesk.store.db import connect
from jobdesk.store.jobs import JobFilter

RUNNING_WORKER = "demo-host-1234"


class Flaky(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        raise ConnectionError(f"upstream {job.input_data.get('host', 'api')} refused the connection")


@asynccontextmanager
async def showcase(dsn: str) -> AsyncIterator[None]:
    """Fill the (migrated) database at `dsn`; while inside, two sleep jobs run on a live worker."""
    settings = load_settings(DATABASE_URL=dsn, JOB_RETRY_INTERVALS=[0.05, 0.05], JOB_SHUTDOWN_TIMEOUT=0)
    async with await JobService.connect(dsn, settings=settings, source="console", pool_size=2) as jobs:
        batch = [demo_pipeline(topic, duration_scale=0.02, fail_rate=0.3) for topic in
                 ("cats at work", "the night shift", "queues explained", "a rainy Monday")]
        batch += [JobCreate("email.send", {"to": f"user{i}@example.com", "host": "smtp.example.com"})
                  for i in range(3)]
        batch += [JobCreate("echo", {"n": i}) for i in range(12)]
        await jobs.enqueue_many(batch)
        processors = {t: c() for t, c in {**BUILTIN, **DEMO, "email.send": Flaky}.items() if t != "sleep"}
        worker = Worker(settings, dsn, processors)
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(2.5)
        held = [r.id for r in (await jobs.job_page(_waiting(), sort="created", descending=False)).rows]
        operator = jobs.as_actor(transitions.Actor("console", "operator"))
        if len(held) >= 2:  # one pipeline approved, one rejected, the others left waiting for a human
            await operator.approve(held[:1])
            await operator.reject(held[1:2], "the draft has the wrong colours")
        await asyncio.sleep(1.5)
        worker.request_stop()
        await task
        sleeps = await jobs.enqueue_many([JobCreate("sleep", {"seconds": 600}) for _ in range(2)])
        await jobs.enqueue_many([JobCreate("pdf.render", {"doc": f"invoice-{i}"}) for i in range(3)])
        await jobs.add_schedule(Schedule(name="nightly-report", type="echo", cron="0 2 * * *",
                                         timezone="Europe/Berlin", input_data={"report": "daily"}))
        await jobs.add_schedule(Schedule(name="cache-warmup", type="noop", every_s=900))
        await jobs.add_schedule(Schedule(name="heartbeat", type="echo", every_s=1, input_data={"ping": True}))
        await jobs.pause_schedule("cache-warmup")
        await jobs.set_type_limits("sleep", {"limit": 3})  # a gauge in the types view: 2 of 3 running
        await jobs.run_schedule("nightly-report")  # a run asked for now, before its first tick
    served = {t: c() for t, c in {**BUILTIN, **DEMO}.items()}  # the blocked stages stay blocked
    sleeper = Worker(settings, dsn, served, worker_id=RUNNING_WORKER)
    sleeping = asyncio.create_task(sleeper.run())
    try:
        await _seed_fleet(dsn)
        await _sleeps_reported(dsn, settings, sleeps)
        yield
    finally:
        sleeper.request_stop()
        sleeper.request_stop()  # the long sleeps go back to the queue at once
        await sleeping


async def _sleeps_reported(dsn: str, settings: Settings, ids: list[str]) -> None:
    """Wait (a few seconds at most) until the running sleeps have reported progress, so the
    pictures show their bars."""
    async with await JobService.connect(dsn, settings=settings, source="console", pool_size=1) as jobs:
        for _ in range(50):
            if len(await jobs.job_progress(ids)) == len(ids):
                return
            await asyncio.sleep(0.1)


def _waiting() -> JobFilter:
    return JobFilter(statuses=frozenset({Status.WAITING_APPROVAL}))


async def _seed_fleet(dsn: str) -> None:
    """Other workers of the fleet, registered as they would register themselves, then aged."""
    rows = [("render-02-5678", "render-02", 5678, "paused", 8, ["video.render", "video.compose"], 3),
            ("batch-7-3456", "batch-7", 3456, "draining", 2, ["echo", "sleep"], 2),
            ("gpu-box-9012", "gpu-box", 9012, "lost", 4, ["image.generate"], 185)]
    conn = await connect(dsn)
    try:
        for worker_id, host, pid, state, slots, types, age_s in rows:
            await fleet.register(conn, worker_id, host, pid, slots, types, "0.1.0")
            await fleet.set_state(conn, worker_id, state)
            await conn.execute("UPDATE workers SET started_at = now() - interval '2 hours', "
                               "heartbeat_at = now() - make_interval(secs => $2) WHERE id = $1", worker_id, age_s)
    finally:
        await conn.close()


async def metrics_history(dsn: str) -> None:
    """An hour of finished work for the Metrics pictures: jobs of four types that completed (and
    some failed) minute by minute, with their wait and run times, inserted with plain SQL and
    added to the rollup as the workers that ran them would have; and a backlog of queued jobs that
    built up and drained 40 to 15 minutes ago, as the workers' depth counts saw it."""
    conn = await connect(dsn)
    try:
        rows = await conn.fetch("""
            INSERT INTO jobs (type, input_data, status, created_at, started_at, completed_at, updated_at,
                              attempts, error_message)
            SELECT t.type, jsonb_build_object('n', g), s.status, f.at - t.run - t.wait, f.at - t.run,
                   CASE WHEN s.status = 'completed' THEN f.at END, f.at, 1,
                   CASE WHEN s.status = 'failed' THEN 'TimeoutError: upstream took too long' END
              FROM generate_series(1, 2400) g
             CROSS JOIN LATERAL (SELECT (ARRAY['echo', 'pdf.render', 'video.render', 'email.send'])[1 + g % 4]
                                        AS type) k
             CROSS JOIN LATERAL (SELECT k.type,
                    make_interval(secs => CASE k.type WHEN 'echo' THEN 0.004 WHEN 'pdf.render' THEN 0.8
                                              WHEN 'video.render' THEN 6 ELSE 0.3 END * (0.5 + (g % 13) / 8.0)) AS run,
                    make_interval(secs => CASE WHEN g % 60 BETWEEN 20 AND 45 THEN 20 ELSE 0.5 END
                                          * (0.2 + (g % 7) / 5.0)) AS wait) t
             CROSS JOIN LATERAL (SELECT now() - make_interval(secs => 3600 * (g % 600) / 600.0
                                        + 30 * sin(g / 40.0)) AS at) f
             CROSS JOIN LATERAL (SELECT CASE WHEN k.type = 'email.send' AND g % 9 = 0 THEN 'failed'
                                             WHEN k.type = 'pdf.render' AND g % 31 = 0 THEN 'failed'
                                             ELSE 'completed' END AS status) s
             WHERE f.at < now()
            RETURNING type, status, extract(epoch FROM updated_at)::float8 AS at,
                      extract(epoch FROM started_at - created_at)::float8 AS wait_s,
                      extract(epoch FROM updated_at - started_at)::float8 AS run_s""")
        await stats_rollup.write_finished(conn, rows)
        # Minute by minute: 15 more queued each minute from 40 to 28 minutes ago, 15 fewer after.
        # The demo's workers counted some of these minutes already: the story's counts win.
        await conn.execute("""
            INSERT INTO job_queue_depth (bucket, status, n)
            SELECT date_trunc('minute', now(), 'UTC') - make_interval(mins => m), s.status,
                   CASE WHEN s.status = 'queued' AND m BETWEEN 15 AND 40 THEN 15 * least(41 - m, m - 14) ELSE 0 END
              FROM generate_series(1, 60) m
             CROSS JOIN unnest($1::text[]) s(status)
            ON CONFLICT (status, bucket) DO UPDATE SET n = EXCLUDED.n""", list(stats_rollup.QUEUE_STATUSES))
    finally:
        await conn.close()


DEMO_VIEWER = "jobdesk_demo_viewer"


async def demo_viewer(dsn: str) -> str:
    """A LOGIN role made a viewer (`jobdesk grant viewer`), for the read-only pictures: the URL of
    `dsn` as that role."""
    conn = await connect(dsn)
    try:
        await conn.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{DEMO_VIEWER}') "
                           f"THEN CREATE ROLE {DEMO_VIEWER} LOGIN; END IF; END $$")
    finally:
        await conn.close()
    async with await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=1) as jobs:
        await jobs.grant_role("viewer", DEMO_VIEWER)
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{DEMO_VIEWER}@{parts.netloc.rsplit('@', 1)[-1]}"))
