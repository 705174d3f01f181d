"""The app, with its two hot routes reached without FastAPI's middleware stack.

`POST /api/jobs` and `GET /api/jobs/{id}` (the enqueue and the polled read) went through a dozen
ASGI layers before their endpoint: Starlette's and FastAPI's error, telemetry and body-limit
middlewares, ours (body limit, metrics), the exception middleware, two exit stacks, the router's
matching and FastAPI's request handler. In a profile under load that was most of the time of
a GET, more than its database read, and each layer is crossed again when the request wakes up
from its group commit or group read. These two endpoints already read their request by hand,
so `JobdeskApp` calls them straight away, and does what those layers do for them: the metrics,
the error bodies of the app's exception handlers (and the 500 of an unexpected error, raised
again for the server to log), the route in the scope.

Only a plain request takes this path; anything else is served by the whole stack, as before:
a query string on the GET (a long-poll), a GET with a body, a POST whose body is not announced
by Content-Length or is over the limit, a root path, an app with a middleware of its own or
CORS, and FastAPI's OpenTelemetry instrumentation when a provider is set (its spans are made
by the stack).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from jobdesk.api import routes_jobs
from jobdesk.api.body_limit import BodyLimitMiddleware
from jobdesk.api.metrics import ApiMetrics, MetricsMiddleware

Endpoint = Callable[[Request], Awaitable[Response]]
_JOBS = "/api/jobs"
_JOB_PREFIX = "/api/jobs/"
# The middlewares whose work the hot path does itself; an app with any other takes the stack.
_KNOWN_MIDDLEWARE = (BodyLimitMiddleware, MetricsMiddleware)


class _HotRoute:
    """One hot route: its endpoint, and how `MetricsMiddleware` counts its requests."""

    def __init__(self, route: APIRoute, metrics: ApiMetrics, method: str) -> None:
        self.route = route
        self.endpoint: Endpoint = route.endpoint
        self._metrics = metrics
        self._method = method

    def count(self, status: int, seconds: float) -> None:
        self._metrics.count(self._method, self.route.path, status, seconds)


class JobdeskApp(FastAPI):
    """FastAPI, which answers a plain request to a hot route by calling its endpoint directly."""

    _hot: tuple[_HotRoute, _HotRoute] | None = None  # (GET one job, POST one job); None: not taken
    _hot_checked = False
    _max_body = 0  # JOBDESK_API_MAX_BODY, as the body-limit middleware was given it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = self._hot if self._hot_checked else self._prepare_hot()
        if hot is not None and scope["type"] == "http" and not scope.get("root_path"):
            route = self._hot_route(scope, hot)
            if route is not None and not self._native_telemetry_on():
                await self._answer(route, scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def _native_telemetry_on(self) -> bool:
        telemetry = getattr(self, "_native_telemetry", None)
        return telemetry is not None and bool(telemetry.enabled())

    def _hot_route(self, scope: Scope, hot: tuple[_HotRoute, _HotRoute]) -> _HotRoute | None:
        """The hot route a plain request is for, with its path parameters in the scope; else None."""
        method, path = scope["method"], scope["path"]
        if method == "GET" and path.startswith(_JOB_PREFIX) and not scope.get("query_string"):
            job_id = path[len(_JOB_PREFIX):]
            if not job_id or "/" in job_id or _body_length(scope) not in (None, 0):
                return None
            scope["path_params"] = {"job_id": job_id}
            return hot[0]
        if method == "POST" and path == _JOBS:
            length = _body_length(scope)
            if length is None or not 0 <= length <= self._max_body:
                return None
            scope["path_params"] = {}
            return hot[1]
        return None

    async def _answer(self, hot: _HotRoute, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        status = 500
        scope["app"] = self
        scope["route"] = hot.route
        scope["endpoint"] = hot.endpoint
        request = Request(scope, receive, send)
        try:
            try:
                response = await hot.endpoint(request)
            except Exception as exc:  # noqa: BLE001 - answered by the app's handler, as the stack would
                response = await self._error_response(request, exc)
            status = response.status_code
            await response(scope, receive, send)
        finally:
            hot.count(status, time.perf_counter() - start)

    async def _error_response(self, request: Request, exc: Exception) -> Response:
        """The app's answer to `exc`, by the handler Starlette's exception middleware would choose
        (a status handler for an HTTPException, else the most specific class). An error that
        only the catch-all takes is answered by it and raised again for the server to log, as
        Starlette's ServerErrorMiddleware does."""
        handlers = self.exception_handlers
        handler = None
        if isinstance(exc, HTTPException) and exc.status_code != 500:
            handler = handlers.get(exc.status_code)
        for kind in type(exc).__mro__:
            if handler is not None or kind is Exception:
                break
            handler = handlers.get(kind)
        if handler is not None:
            return await _call(handler, request, exc)
        handler = handlers.get(500) or handlers.get(Exception)
        if handler is None:
            raise exc
        response = await _call(handler, request, exc)
        await response(request.scope, request.receive, request._send)
        raise exc

    def _prepare_hot(self) -> tuple[_HotRoute, _HotRoute] | None:
        """The hot routes, once the app is complete (its middlewares and routes added); None
        when the app is not one the hot path can stand in for."""
        self._hot_checked = True
        limits = [m.kwargs["max_body"] for m in self.user_middleware if m.cls is BodyLimitMiddleware]
        plain = (self.root_path == "" and self.max_body_size is None and len(limits) == 1
                 and all(m.cls in _KNOWN_MIDDLEWARE for m in self.user_middleware))
        ctx = getattr(self.state, "ctx", None)
        if not plain or ctx is None:
            return None
        get = _route_of(self, routes_jobs.get_job, "GET", _JOB_PREFIX + "x")
        post = _route_of(self, routes_jobs.create_job, "POST", _JOBS)
        if get is None or post is None or get.path != _JOB_PREFIX + "{job_id}" or post.path != _JOBS:
            return None
        self._max_body = int(limits[0])  # type: ignore[call-overload]
        self._hot = (_HotRoute(get, ctx.metrics, "GET"), _HotRoute(post, ctx.metrics, "POST"))
        return self._hot


async def _call(handler: Callable[..., Any], request: Request, exc: Exception) -> Response:
    response = handler(request, exc)
    return await response if inspect.isawaitable(response) else response  # type: ignore[no-any-return]


def _route_of(app: FastAPI, endpoint: Callable[..., Any], method: str, probe: str) -> APIRoute | None:
    """The route of `endpoint`, when the router would choose it for every request the hot path
    takes as its (`probe` is one): no route before it takes `method` on such a path."""
    one_segment = probe.startswith(_JOB_PREFIX)
    for route in app.router.routes:
        if isinstance(route, APIRoute) and route.endpoint is endpoint and method in (route.methods or ()):
            return route
        if not isinstance(route, Route):
            return None  # a mount, say: it could take anything
        if method not in (route.methods or ()):
            continue
        rest = route.path[len(_JOB_PREFIX):] if route.path.startswith(_JOB_PREFIX) else None
        if route.path_regex.match(probe) or (one_segment and rest is not None and "/" not in rest):
            return None
    return None


def _body_length(scope: Scope) -> int | None:
    """The body's length as Content-Length announces it; None without one; -1 for a body the
    stack must see (chunked, or an unreadable or repeated length)."""
    length = None
    for name, value in scope["headers"]:
        if name == b"content-length":
            if length is not None or not value.isdigit():
                return -1
            length = int(value)
        elif name == b"transfer-encoding":
            return -1
    return length
