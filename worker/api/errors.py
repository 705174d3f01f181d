"""One error body for every failure: {"error": {"code", "message"}}, with the right status."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from jobdesk.core.errors import (
    DatabaseUnavailable,
    IllegalTransition,
    InvalidJob,
    JobNotFound,
    JobNotRunning,
    ReadOnlyRole,
    WorkerNotAnswering,
)
from jobdesk.store.db import CONNECTION_ERRORS
from jobdesk.store.idempotency import IdempotencyConflict
from jobdesk.store.outage import reason

log = logging.getLogger("jobdesk.api")

RETRY_AFTER_S = 2
_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "payload_too_large", 422: "invalid",
               503: "database_unavailable"}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def unavailable() -> JSONResponse:
    return error_response(503, "database_unavailable", "the database is not reachable right now; try again",
                          {"Retry-After": str(RETRY_AFTER_S)})


def field_path(loc: Sequence[object]) -> str:
    """("body", "jobs", 0, "type") -> "body.jobs[0].type"."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def allowed_methods(request: Request) -> str:
    """Every method that some route takes at this request's path, as an `Allow` header. Starlette
    names only those of the first route whose path matches (`/api/jobs` is two routes, GET and POST)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if getattr(route, "methods", None) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods))


async def _on_api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.headers)


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    headers = dict(exc.headers or {})
    if exc.status_code == 413:
        message = "the request body is too large"
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request) or headers.get("Allow", "")
    return error_response(exc.status_code, _HTTP_CODES.get(exc.status_code, "error"), message, headers)


async def _on_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return error_response(422, "invalid", f"{field_path(first['loc'])}: {first['msg']}{more}")


async def _on_not_found(_: Request, exc: Exception) -> JSONResponse:
    return error_response(404, "not_found", str(exc))


async def _on_illegal(_: Request, exc: Exception) -> JSONResponse:
    return error_response(409, "illegal_transition", str(exc))


async def _on_read_only_role(_: Request, exc: Exception) -> JSONResponse:
    # The API's own database role cannot change jobs (`jobdesk grant viewer`): nothing was changed.
    return error_response(403, "read_only", str(exc))


async def _on_not_running(_: Request, exc: Exception) -> JSONResponse:
    return error_response(409, "not_running", str(exc))


async def _on_not_answering(_: Request, exc: Exception) -> JSONResponse:
    return error_response(504, "worker_not_answering", str(exc))


async def _on_idempotency(_: Request, exc: Exception) -> JSONResponse:
    return error_response(409, "idempotency_conflict", str(exc))


async def _on_invalid(_: Request, exc: Exception) -> JSONResponse:
    path = getattr(exc, "path", None) or "body"
    return error_response(422, "invalid", f"{path}: {exc}")


async def _on_data_error(request: Request, exc: Exception) -> JSONResponse:
    # A value PostgreSQL refuses (a NUL in a path parameter, a number out of range): the
    # request's fault, not the server's.
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return error_response(422, "invalid", f"{request.url.path}: the database refused a value: {first}")


async def _on_unavailable(request: Request, exc: Exception) -> JSONResponse:
    why = reason(exc)
    outage = getattr(getattr(request.app.state.ctx.service, "pool", None), "outage", None)
    if outage is not None and not isinstance(exc, TimeoutError):
        # The database away: said once for the whole outage (and once when it is back) by the
        # pool's log, not once per request answered 503.
        outage.down(why)
    else:
        log.warning("database unavailable: %s", why)
    return unavailable()


async def _on_read_only(request: Request, exc: Exception) -> JSONResponse:
    """A write refused by a read-only server (a standby, or an old primary): nothing was written.
    The pool's connections are dropped, so that the next ones find the writable host."""
    pool = getattr(request.app.state.ctx.service, "pool", None)
    if pool is not None:
        await pool.expire_connections()
    return await _on_unavailable(request, exc)


async def _on_internal(request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal", "internal error; it has been logged")


def install(app: FastAPI) -> None:
    """Answer every failure with the one error body and its status (the most specific handler wins)."""
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(JobNotFound, _on_not_found)
    app.add_exception_handler(IllegalTransition, _on_illegal)
    app.add_exception_handler(ReadOnlyRole, _on_read_only_role)
    app.add_exception_handler(JobNotRunning, _on_not_running)
    app.add_exception_handler(WorkerNotAnswering, _on_not_answering)
    app.add_exception_handler(IdempotencyConflict, _on_idempotency)
    app.add_exception_handler(InvalidJob, _on_invalid)
    app.add_exception_handler(asyncpg.DataError, _on_data_error)
    app.add_exception_handler(asyncpg.ReadOnlySQLTransactionError, _on_read_only)
    kinds: list[type[Exception]] = [DatabaseUnavailable, TimeoutError, asyncio.TimeoutError,
                                    *(k for k in CONNECTION_ERRORS if issubclass(k, Exception))]
    for kind in kinds:
        app.add_exception_handler(kind, _on_unavailable)
    app.add_exception_handler(Exception, _on_internal)
