"""Prometheus metrics: requests and latency per route template, and jobs per type and status."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobdesk.service.jobs import JobService

JOB_COUNTS_MAX_AGE_S = 5.0  # the job counts are read at most this often
JOB_COUNT_CAP = 100_000  # rows read per status at most


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("jobdesk_api_requests", "HTTP requests answered", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram("jobdesk_api_request_duration_seconds", "Time to answer an HTTP request",
                                 ["method", "route"], registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
        self.jobs = Gauge("jobdesk_jobs", f"Queued, running and failed jobs per type (each status counted "
                          f"up to {JOB_COUNT_CAP})", ["type", "status"], registry=self.registry)
        self.held = Gauge("jobdesk_jobs_held_back", "Runnable jobs a limit keeps from starting now, per type and "
                          "limit (rate, user_rate, user_running, type_running)", ["type", "limit"],
                          registry=self.registry)
        self._jobs_read_at = 0.0
        # The labelled children of `requests` and `latency`, looked up once each: a lookup cost
        # more than the count, on the hot routes. Made on a route's first answer of each status,
        # so that /metrics shows only what was asked.
        self._counted: dict[tuple[str, str, int], Counter] = {}
        self._timed: dict[tuple[str, str], Histogram] = {}

    def count(self, method: str, route: str, status: int, seconds: float) -> None:
        """One request answered: under its method, route template and status, with its time."""
        counter = self._counted.get((method, route, status))
        if counter is None:
            counter = self._counted[method, route, status] = self.requests.labels(method, route, str(status))
        counter.inc()
        timer = self._timed.get((method, route))
        if timer is None:
            timer = self._timed[method, route] = self.latency.labels(method, route)
        timer.observe(seconds)

    async def render(self, service: JobService) -> bytes:
        now = time.monotonic()
        if now - self._jobs_read_at >= JOB_COUNTS_MAX_AGE_S:
            counts = await service.active_counts(JOB_COUNT_CAP)
            self.jobs.clear()
            for (type_, status), n in counts.items():
                self.jobs.labels(type_, status).set(n)
            self.held.clear()
            for use in await service.limits():
                if use.kind != "fair_share":
                    self.held.labels(use.type, use.kind).set(use.held)
            self._jobs_read_at = now
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts every HTTP request under its route template (not its path, which holds ids)."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            template = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.count(scope.get("method", ""), template, status, time.perf_counter() - start)
