"""The hot path of `POST /api/jobs` and `GET /api/jobs/{id}` (`jobdesk.api.hot_path`): a plain
request takes it, and gets what FastAPI's whole stack answers (status, headers and body, error
bodies too); the requests it is not for are served by the stack.

Each request is sent twice to the same app: as a server calls it (`app(scope, ...)`, the hot
path's way in) and through `FastAPI.__call__`, the stack alone. Which of the two answered is
read from the scope the app was given: the stack's exit-stack middleware, just before its router,
leaves its mark there.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from jobdesk.api import create_app
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from tests.otel_spans import spans  # noqa: F401 - the fixture

STACK_MARK = "fastapi_middleware_astack"  # set by FastAPI's AsyncExitStackMiddleware, inside the stack


class Served:
    """One app, reached two ways, with the scopes it was given."""

    def __init__(self, app: FastAPI, token: str, *, raise_errors: bool = False) -> None:
        self.app = app
        self.scopes: list[dict[str, Any]] = []

        def client(call: Any) -> httpx.AsyncClient:
            async def recorded(scope: dict[str, Any], receive: Any, send: Any) -> None:
                self.scopes.append(scope)
                await call(scope, receive, send)

            transport = httpx.ASGITransport(app=recorded, raise_app_exceptions=raise_errors)
            return httpx.AsyncClient(transport=transport, base_url="http://api",
                                     headers={"Authorization": f"Bearer {token}"})

        self.hot = client(app)
        self.stack = client(lambda scope, receive, send: FastAPI.__call__(app, scope, receive, send))

    def took_hot_path(self) -> bool:
        """Whether the last request was answered without the stack: routed (a request the stack's
        middlewares refuse is not), and not by the stack's router."""
        return "route" in self.scopes[-1] and STACK_MARK not in self.scopes[-1]

    async def both(self, method: str, url: str, **options: Any) -> tuple[httpx.Response, httpx.Response]:
        """The request through the hot path's way in (which must take it), then through the stack."""
        hot = await self.hot.request(method, url, **options)
        assert self.took_hot_path(), f"{method} {url} did not take the hot path"
        stack = await self.stack.request(method, url, **options)
        assert not self.took_hot_path()
        return hot, stack


@pytest.fixture
async def service(dsn: str) -> AsyncIterator[JobService]:
    service = await JobService.connect(dsn, settings=load_settings(JOBDESK_API_MAX_BODY=4096), pool_size=4)
    yield service
    await service.close()


@contextlib.asynccontextmanager
async def served(service: JobService, dsn: str, *, raise_errors: bool = False,
                 **options: Any) -> AsyncIterator[Served]:
    token = await service.create_token(f"admin-{uuid.uuid4().hex[:8]}")
    app = create_app(service, dsn, settings=options.pop("settings", service.settings), **options)
    async with app.router.lifespan_context(app):
        both = Served(app, token, raise_errors=raise_errors)
        async with both.hot, both.stack:
            yield both


_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def same_answer(hot: httpx.Response, stack: httpx.Response) -> None:
    """The same status, headers and body (where the body names the job it made, its id aside)."""
    assert (hot.status_code, _UUID.sub(b"<id>", hot.content)) == \
        (stack.status_code, _UUID.sub(b"<id>", stack.content)), (hot.text, stack.text)
    assert hot.headers.multi_items() == stack.headers.multi_items()


def without(document: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in keys}


async def test_a_plain_enqueue_and_read_take_the_hot_path_and_answer_as_the_stack(service: JobService,
                                                                                  dsn: str) -> None:
    async with served(service, dsn) as api:
        body = {"type": "hot", "input_data": {"n": 1}, "priority": 2}
        hot, stack = await api.both("POST", "/api/jobs", json=body)
        assert hot.status_code == stack.status_code == 201
        assert hot.headers.keys() == stack.headers.keys() and hot.headers["content-type"] == "application/json"
        volatile = ("id", "created_at", "updated_at")
        assert without(hot.json(), *volatile) == without(stack.json(), *volatile)
        assert hot.json()["input_data"] == {"n": 1} and hot.json()["duplicate"] is False
        for created in (hot.json(), stack.json()):
            same_answer(*await api.both("GET", f"/api/jobs/{created['id']}"))
        read = (await api.hot.get(f"/api/jobs/{hot.json()['id']}")).json()
        assert read["status"] == "queued" and read["waiting_reason"]  # read after the write: no stale answer
        # A duplicate (200, "duplicate": true) and a debounced enqueue, through both.
        keyed = {"type": "hot", "input_data": {}, "unique_key": "k", "debounce": 30}
        first = await api.hot.post("/api/jobs", json=keyed)
        hot, stack = await api.both("POST", "/api/jobs", json=keyed)
        assert first.status_code == 201 and hot.status_code == stack.status_code == 200
        assert hot.json()["id"] == stack.json()["id"] == first.json()["id"]
        assert hot.json()["duplicate"] is stack.json()["duplicate"] is True
        assert hot.json()["debounced"] is stack.json()["debounced"] is True


async def test_errors_on_the_hot_path_are_the_stack_s(service: JobService, dsn: str) -> None:
    reader = await service.create_token("reader", scopes=["read"])
    submitter = await service.create_token("submitter", scopes=["submit"])
    async with served(service, dsn) as api:
        job_id = (await api.hot.post("/api/jobs", json={"type": "x", "input_data": {}})).json()["id"]
        json_type = {"Content-Type": "application/json"}
        cases: list[tuple[str, str, dict[str, Any]]] = [
            ("GET", "/api/jobs/nope", {}),  # 404
            ("GET", f"/api/jobs/{job_id}", {"headers": {"Authorization": ""}}),  # 401
            ("GET", f"/api/jobs/{job_id}", {"headers": {"Authorization": "Bearer wrong"}}),  # 401
            ("GET", f"/api/jobs/{job_id}", {"headers": {"Authorization": f"Bearer {submitter}"}}),  # 403
            ("GET", "/api/jobs/a%00b", {}),  # a value PostgreSQL refuses: 422
            ("POST", "/api/jobs", {"json": {"type": "x", "input_data": {}},
                                   "headers": {"Authorization": f"Bearer {reader}"}}),  # 403
            ("POST", "/api/jobs", {"json": {"type": "x", "input_data": {}}, "headers": {"Authorization": ""}}),
            ("POST", "/api/jobs", {"content": b"{not json", "headers": json_type}),  # 422 body[1]
            ("POST", "/api/jobs", {"content": b"", "headers": json_type}),  # 422 body: missing
            ("POST", "/api/jobs", {"content": b"\xff\xfe\x00", "headers": json_type}),  # 400
            ("POST", "/api/jobs", {"content": b'{"type": "x", "input_data": {}}',
                                   "headers": {"Content-Type": "text/plain"}}),  # 422: not JSON
            ("POST", "/api/jobs", {"json": {"input_data": {}}}),  # 422 body.type
            ("POST", "/api/jobs", {"json": {"type": "x", "input_data": {}, "extra": 1}}),  # 422
            ("POST", "/api/jobs", {"json": {"type": "x", "input_data": {}, "dependent_on_jobs": ["ghost"]}}),
            ("POST", "/api/jobs", {"json": {"type": "x", "input_data": {}},
                                   "headers": {"Idempotency-Key": "k" * 300}}),  # 422 header
        ]
        statuses = []
        for method, url, options in cases:
            hot, stack = await api.both(method, url, **options)
            same_answer(hot, stack)
            statuses.append(hot.status_code)
            assert set(hot.json()) == {"error"}
        assert statuses == [404, 401, 401, 403, 422, 403, 401, 422, 422, 400, 422, 422, 422, 422, 422]
        assert "ghost" in hot.json()["error"]["message"] or "idempotency" in hot.json()["error"]["message"]


async def test_of_repeated_headers_the_first_counts_on_both_paths(service: JobService, dsn: str) -> None:
    async with served(service, dsn) as api:
        good = api.hot.headers["Authorization"]
        job_id = (await api.hot.post("/api/jobs", json={"type": "x", "input_data": {}})).json()["id"]
        first_good = [("Authorization", good), ("Authorization", "Bearer wrong")]
        hot, stack = await api.both("GET", f"/api/jobs/{job_id}", headers=first_good)
        assert hot.status_code == stack.status_code == 200
        hot, stack = await api.both("GET", f"/api/jobs/{job_id}", headers=first_good[::-1])
        assert hot.status_code == stack.status_code == 401


async def test_an_unexpected_error_is_the_stack_s_500_and_raised_for_the_server(service: JobService,
                                                                                 dsn: str) -> None:
    def broken(_type: str, _input: dict[str, Any]) -> None:
        raise RuntimeError("the hook is broken")

    async with served(service, dsn, validate_input=broken) as api:
        hot, stack = await api.both("POST", "/api/jobs", json={"type": "x", "input_data": {}})
        same_answer(hot, stack)
        assert hot.status_code == 500 and hot.json()["error"]["code"] == "internal"
    async with served(service, dsn, validate_input=broken, raise_errors=True) as api:
        for client in (api.hot, api.stack):  # the server sees the error, to log it
            with pytest.raises(RuntimeError, match="the hook is broken"):
                await client.post("/api/jobs", json={"type": "x", "input_data": {}})


async def test_the_requests_the_hot_path_leaves_to_the_stack(service: JobService, dsn: str) -> None:
    async with served(service, dsn) as api:
        job_id = (await api.hot.post("/api/jobs", json={"type": "x", "input_data": {}})).json()["id"]
        assert api.took_hot_path()
        left: list[tuple[str, str, dict[str, Any]]] = [
            ("GET", f"/api/jobs/{job_id}?wait=0.1", {}),  # a long-poll
            ("GET", f"/api/jobs/{job_id}", {"content": b"x"}),  # a GET with a body
            ("GET", f"/api/jobs/{job_id}/logs", {}),  # another route
            ("GET", "/api/jobs", {}),
            ("POST", "/api/jobs", {"content": _chunks(), "headers": {"Content-Type": "application/json"}}),
            ("POST", "/api/jobs", {"json": {"type": "x", "input_data": {"blob": "x" * 5000}}}),  # 413
        ]
        for method, url, options in left:
            resp = await api.hot.request(method, url, **options)
            assert resp.status_code in (200, 201, 413), resp.text
            assert not api.took_hot_path(), f"{method} {url} took the hot path"
        assert resp.status_code == 413
    cors = load_settings(JOBDESK_API_MAX_BODY=4096, JOBDESK_API_CORS_ORIGINS=["https://ui.example"])
    async with served(service, dsn, settings=cors) as api:  # a middleware the hot path does not stand in for
        resp = await api.hot.get(f"/api/jobs/{job_id}", headers={"Origin": "https://ui.example"})
        assert resp.status_code == 200 and resp.headers["access-control-allow-origin"] == "https://ui.example"
        assert not api.took_hot_path()


async def _chunks() -> AsyncIterator[bytes]:
    """A body without Content-Length (chunked)."""
    yield b'{"type": "x", '
    yield b'"input_data": {}}'


async def test_with_a_tracer_provider_set_fastapi_s_server_span_is_made_by_the_stack(
        service: JobService, dsn: str, spans: InMemorySpanExporter) -> None:  # noqa: F811 - the fixture
    async with served(service, dsn) as api:
        job_id = (await api.hot.post("/api/jobs", json={"type": "x", "input_data": {}})).json()["id"]
        assert not api.took_hot_path()
        assert (await api.hot.get(f"/api/jobs/{job_id}")).status_code == 200
        assert not api.took_hot_path()
    server = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert [s.name for s in server] == ["POST /api/jobs", "GET /api/jobs/{job_id}"]


async def test_hot_path_requests_are_counted_in_the_metrics(service: JobService, dsn: str) -> None:
    async with served(service, dsn) as api:
        job_id = (await api.hot.post("/api/jobs", json={"type": "x", "input_data": {}})).json()["id"]
        for _ in range(3):
            assert (await api.hot.get(f"/api/jobs/{job_id}")).status_code == 200
        assert (await api.hot.get("/api/jobs/nope")).status_code == 404
        assert api.took_hot_path()
        text = (await api.hot.get("/metrics")).text
    assert 'jobdesk_api_requests_total{method="POST",route="/api/jobs",status="201"} 1.0' in text
    assert 'jobdesk_api_requests_total{method="GET",route="/api/jobs/{job_id}",status="200"} 3.0' in text
    assert 'jobdesk_api_requests_total{method="GET",route="/api/jobs/{job_id}",status="404"} 1.0' in text
    assert 'jobdesk_api_request_duration_seconds_count{method="GET",route="/api/jobs/{job_id}"} 4.0' in text
