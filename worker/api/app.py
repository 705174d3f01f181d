"""The ASGI app: `create_app(service, dsn)` gives a FastAPI app on one `JobService`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from jobdesk.api import (
    errors,
    routes_bulk,
    routes_events,
    routes_job_logs,
    routes_job_stacks,
    routes_jobs,
    routes_pipelines,
    routes_schedules,
    routes_system,
    routes_types,
)
from jobdesk.api.auth import Caller, TokenCache, document_security
from jobdesk.api.batcher import Batcher
from jobdesk.api.body_limit import BodyLimitMiddleware
from jobdesk.api.events import ChangeHub
from jobdesk.api.hand_read import document_bodies
from jobdesk.api.hot_path import JobdeskApp
from jobdesk.api.metrics import ApiMetrics, MetricsMiddleware
from jobdesk.core.models import JobCreate
from jobdesk.core.rules import Actor
from jobdesk.core.settings import Settings
from jobdesk.core.version import __version__
from jobdesk.service.jobs import Enqueued, JobService
from jobdesk.store.tokens import SCOPES, TOKENS_CHANNEL

# Called with (type, input_data) before every enqueue; raises InvalidJob or ValueError to refuse
# it (422 naming input_data). The hook typed processor inputs plug into.
InputValidator = Callable[[str, dict[str, Any]], None]


def accept_any_input(_type: str, _input_data: dict[str, Any]) -> None:
    """The default: any JSON object is accepted."""


# The sections of /docs, in this order (the routes are matched in another, cheapest first).
DOCUMENT_TAGS = [
    {"name": "jobs", "description": "Enqueue one job, read and follow it, and act on it."},
    {"name": "pipelines", "description": "Jobs that depend on each other, created and followed as one."},
    {"name": "bulk", "description": "Retry or cancel every job that matches a filter."},
    {"name": "schedules", "description": "Periodic jobs: list, pause and resume."},
    {"name": "types", "description": "Job types across the fleet: paused or not, their limits in force; pause, "
                                     "resume, and limits set at run time."},
    {"name": "events", "description": "Emit the events that durable jobs wait for (`job.wait_for_event`)."},
    {"name": "system", "description": "Health, Prometheus metrics, and a constant route."},
]


@dataclass
class ApiContext:
    """What the routes share, per process: nothing here is state a second process would miss."""

    service: JobService
    hub: ChangeHub
    enqueues: Batcher[tuple[Actor, JobCreate], Enqueued]  # group commit of POST /api/jobs
    reads: Batcher[tuple[JobService, str], str]  # group read of GET /api/jobs/{id}
    metrics: ApiMetrics
    tokens: TokenCache | None  # None: no auth (`--no-auth`)
    anonymous: Caller
    validate_input: InputValidator


def create_app(service: JobService, dsn: str, *, settings: Settings | None = None, auth: bool = True,
               validate_input: InputValidator = accept_any_input) -> FastAPI:
    settings = settings or service.settings
    tokens = TokenCache(service) if auth else None
    anonymous_service = service.as_actor(Actor.current("api"))
    ctx = ApiContext(
        service=service,
        hub=ChangeHub(dsn, settings, service.job_rows, {TOKENS_CHANNEL: tokens.clear} if tokens else None,
                      send=service.notify),
        # One group commit at a time: a commit that enqueues sends a NOTIFY, and PostgreSQL holds
        # its notification queue's lock through the commit's WAL flush, so a second batch in
        # flight only waited in line behind the first (and the workers' commits), with requests
        # that would have joined the next, larger batch (api_bench: 0.75 -> 0.82 of the bare POST).
        enqueues=Batcher(anonymous_service.enqueue_batch, max_in_flight=1),
        reads=Batcher(service.job_details_json),
        metrics=ApiMetrics(),
        tokens=tokens,
        anonymous=Caller(anonymous_service, None, None, frozenset(SCOPES)),
        validate_input=validate_input,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await ctx.hub.start()
        try:
            yield
        finally:
            await ctx.hub.stop()

    app = JobdeskApp(title="jobdesk", version=__version__, lifespan=lifespan, openapi_tags=DOCUMENT_TAGS,
                  description="Enqueue, follow and act on jobdesk jobs and pipelines.")
    app.state.ctx = ctx
    errors.install(app)
    # The cheap and the polled routes first (probes, the constant, then the jobs), and flat in
    # the app's own list, which is matched once per request in order: `include_router` keeps a
    # router as a branch that is matched twice (to choose it, then inside it), and that cost the
    # constant route half its time in a profile. FastAPI's /openapi.json and /docs go last.
    routers = (routes_system.router, routes_jobs.router, routes_job_logs.router, routes_job_stacks.router,
               routes_bulk.router,
               routes_pipelines.router, routes_schedules.router, routes_types.router, routes_events.router)
    framework_routes = list(app.router.routes)
    app.router.routes[:] = [*(route for router in routers for route in router.routes), *framework_routes]
    document_security(app)
    document_bodies(app)
    if settings.JOBDESK_API_CORS_ORIGINS:
        app.add_middleware(CORSMiddleware, allow_origins=settings.JOBDESK_API_CORS_ORIGINS,
                           allow_methods=["GET", "POST", "PUT"],
                           allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"])
    app.add_middleware(BodyLimitMiddleware, max_body=settings.JOBDESK_API_MAX_BODY)
    app.add_middleware(MetricsMiddleware, metrics=ctx.metrics)
    return app
