"""Traces across HTTP, on real uvicorn servers on loopback: a FastAPI application's request
continues into the job its route enqueues, and each request to `jobdesk api` keeps its own
trace through the group commit that enqueues many requests' jobs at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import uvicorn
from fastapi import FastAPI, Request
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from jobdesk import JobClient
from jobdesk.api import create_app
from jobdesk.service.jobs import JobService
from tests.helpers import RunningWorker, free_port, wait_for
from tests.observe.test_tracing import PROCESSORS, ended
from tests.otel_spans import of_job, parent_id

W3C = TraceContextTextMapPropagator()


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[str]:
    """`app` under uvicorn on a loopback port of its own, in this event loop; its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on", loop="none"))
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(30):
            while not server.started:
                assert not task.done(), "the server did not start"
                await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def ancestors(span: ReadableSpan, finished: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """A span's ancestors among `finished`, nearest first."""
    by_id = {s.context.span_id: s for s in finished}
    out = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        out.append(span)
    return out


def client_headers() -> dict[str, str]:
    """The traceparent an instrumented HTTP client sends from its current span."""
    headers: dict[str, str] = {}
    W3C.inject(headers)
    return headers


async def test_a_fastapi_request_s_trace_continues_into_the_job_it_enqueues(
        spans: InMemorySpanExporter, conn: asyncpg.Connection, dsn: str) -> None:
    tracer = trace.get_tracer("app")
    app = FastAPI()

    @app.post("/signup")
    async def signup(request: Request) -> dict[str, str]:
        # What a FastAPI instrumentation does: a server span, child of the caller's traceparent.
        with tracer.start_as_current_span("signup", context=W3C.extract(dict(request.headers)),
                                          kind=SpanKind.SERVER):
            job_id = await request.app.state.jobs.enqueue("trace.ok", {"email": "a@example.com"})
        return {"id": job_id}

    async with await JobClient.connect(dsn, pool_size=2) as jobs:
        app.state.jobs = jobs
        async with served(app) as url, httpx.AsyncClient(base_url=url) as http:
            with tracer.start_as_current_span("browser click", kind=SpanKind.CLIENT) as click:
                answer = await http.post("/signup", headers=client_headers())
    assert answer.status_code == 200, answer.text
    job_id = answer.json()["id"]
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: ended(conn, job_id), what="the job")
    finally:
        await worker.stop()

    finished = spans.get_finished_spans()
    [server] = [s for s in finished if s.name == "signup"]
    [enqueue] = of_job(finished, "jobdesk.enqueue", job_id)
    [run] = of_job(finished, "jobdesk.run", job_id)
    trace_id = click.get_span_context().trace_id
    assert server.context.trace_id == enqueue.context.trace_id == run.context.trace_id == trace_id
    assert parent_id(server) == click.get_span_context().span_id
    assert parent_id(enqueue) == server.context.span_id
    # The caller's span came over HTTP, as its traceparent header.
    assert [s.name for s in ancestors(run, finished)] == ["jobdesk.enqueue", "signup", "browser click"]


async def test_each_request_to_the_api_keeps_its_trace_through_the_group_commit(
        spans: InMemorySpanExporter, conn: asyncpg.Connection, dsn: str) -> None:
    """POST /api/jobs enqueues the jobs of concurrent requests in one group commit, which runs
    apart from the requests: each job still carries its own request's trace (FastAPI's server
    span, child of the request's traceparent, is its enqueue span's parent)."""
    tracer = trace.get_tracer("caller")
    service = await JobService.connect(dsn, pool_size=4)
    app = create_app(service, dsn, settings=service.settings, auth=False)

    async def post(http: httpx.AsyncClient, n: int) -> tuple[str, int, int]:
        with tracer.start_as_current_span(f"request {n}", kind=SpanKind.CLIENT) as request:
            answer = await http.post("/api/jobs", json={"type": "trace.ok", "input_data": {"n": n}},
                                     headers=client_headers())
        assert answer.status_code == 201, answer.text
        return answer.json()["id"], request.get_span_context().trace_id, request.get_span_context().span_id

    try:
        async with served(app) as url, httpx.AsyncClient(base_url=url) as http:
            posted = await asyncio.gather(*(post(http, n) for n in range(12)))
    finally:
        await service.close()
    assert len({trace_id for _, trace_id, _ in posted}) == 12
    finished = spans.get_finished_spans()
    for job_id, trace_id, span_id in posted:
        [enqueue] = of_job(finished, "jobdesk.enqueue", job_id)
        assert enqueue.context.trace_id == trace_id
        assert ancestors(enqueue, finished)[-1].context.span_id == span_id  # the request's own span
        stored = await conn.fetchval("SELECT trace_context FROM jobs WHERE id = $1", job_id)
        assert stored["traceparent"].startswith(f"00-{trace_id:032x}-{enqueue.context.span_id:016x}-")
