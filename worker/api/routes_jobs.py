"""/api/jobs: enqueue, read, list, follow (SSE and long-poll) and act on jobs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from jobdesk.api.auth import Caller, authorize, guarded_by, raw_header, require
from jobdesk.api.errors import ApiError
from jobdesk.api.hand_read import documented_body, raw_json, validate_body
from jobdesk.api.render import detail_json, job_json, version
from jobdesk.api.schemas import ErrorOut, JobCreatedOut, JobDetailOut, JobIn, JobPage, RejectIn, RetryIn
from jobdesk.core import tracing
from jobdesk.core.errors import InvalidJob
from jobdesk.core.json_value import JsonObject
from jobdesk.core.models import TERMINAL_STATUSES, JobCreate, JobRecord, Status
from jobdesk.store import job_document
from jobdesk.store.idempotency import fingerprint
from jobdesk.store.jobs import JobFilter
from jobdesk.store.search_syntax import parse_search

log = logging.getLogger("jobdesk.api")
router = APIRouter(prefix="/api/jobs", tags=["jobs"])
MAX_WAIT_S = 60
KEEP_ALIVE_S = 15.0  # an event stream says something at least this often
PROGRESS_POLL_S = 1.0  # a running job's progress is read this often by a stream that cannot LISTEN
MAX_LIMIT = 500
MAX_QUERY = 2000  # characters of a search query (`q`)

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (401, 403, 404, 409, 413, 422, 500, 503)}


def locate(exc: InvalidJob, prefix: str, index: dict[str, int] | None = None) -> InvalidJob:
    """Give an enqueue refusal the path of the field it is about (`body.jobs[2].dependent_on_jobs`)."""
    where = prefix
    if index is not None and exc.job_id in index:
        where += f".jobs[{index[exc.job_id]}]"
    elif index is not None and exc.field and exc.field != "user_id":
        where += ".jobs"
    if exc.field:
        where += f".{exc.field}"
    exc.path = where  # type: ignore[attr-defined]
    return exc


def _json(body: object, status: int = 200) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json")


_IDEMPOTENCY_KEY = TypeAdapter(Annotated[str, Field(max_length=255)])
_IDEMPOTENCY_PARAMETER = {"name": "idempotency-key", "in": "header", "required": False,
                          "schema": {"anyOf": [_IDEMPOTENCY_KEY.json_schema(), {"type": "null"}],
                                     "title": "Idempotency-Key"}}


def _idempotency_key(request: Request) -> str | None:
    """The Idempotency-Key header, read by hand for the reason `_wait_query` gives."""
    raw = raw_header(request, b"idempotency-key")
    if raw is None:
        return None
    key = raw.decode("latin-1")
    try:
        return _IDEMPOTENCY_KEY.validate_python(key)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("header", "idempotency-key")} for e in exc.errors()]) from None


@router.post("", status_code=201, response_model=JobCreatedOut,
             responses={**ERRORS, 200: {"model": JobCreatedOut, "description": "a replay, or a duplicate"}},
             openapi_extra={"parameters": [_IDEMPOTENCY_PARAMETER]})
@guarded_by("submit")
@documented_body(JobIn)
async def create_job(request: Request) -> Response:
    # The enqueue route: its body and caller are read by hand, in FastAPI's order (the body,
    # then the caller, then the body's fields), as FastAPI's solving of declared ones cost a
    # fifth of its time (`documented_body` and `guarded_by` document them).
    raw = await raw_json(request)
    caller = await authorize(request, "submit")
    body = validate_body(raw, JobIn)
    ctx = request.app.state.ctx
    idempotency_key = _idempotency_key(request)
    # The job is enqueued all the same; the answer says so when no live worker serves its type.
    warnings = list((await caller.service.unserved_warnings([body.type])).values())
    try:
        ctx.validate_input(body.type, body.input_data)
    except (InvalidJob, ValueError) as exc:
        raise locate(InvalidJob(str(exc), field="input_data"), "body") from None
    job = JobCreate(body.type, body.input_data, dependent_on_jobs=list(body.dependent_on_jobs),
                    user_id=caller.user_id if caller.user_id is not None else body.user_id,
                    pipeline_id=body.pipeline_id, priority=body.priority, scheduled_at=body.scheduled_at,
                    unique_key=body.unique_key, debounce=body.debounce, debounce_max=body.debounce_max)

    def created(record: JobRecord) -> JsonObject:
        # A new job keeps the id it was given; a duplicate is answered with the job holding its key.
        out: JsonObject = {**job_json(record), "duplicate": record.id != job.id}
        if job.debounce is not None:  # a duplicate left queued was debounced (the enqueue updated it)
            out["debounced"] = (record.id != job.id and record.status == Status.QUEUED and record.is_active
                                and record.started_at is None)
        out["warnings"] = warnings
        return out

    # The enqueue span is the request's: the group commit runs apart from it (see `enqueue_batch`).
    try:
        with tracing.enqueueing([job], incoming=lambda: request.headers):
            if idempotency_key:
                done = await caller.service.enqueue_once(
                    caller.owner, idempotency_key, fingerprint("POST /api/jobs", body.model_dump(mode="json")),
                    [job], lambda records: created(records[0]))
                return _json(done.body, 200 if done.replayed or done.body.get("duplicate") else 201)
            if caller.user_id is not None and job.dependent_on_jobs:
                record = (await caller.service.enqueue_records([job]))[0]  # checks the user may see the dependencies
                body_out = created(record)
                return _json(body_out, 200 if body_out["duplicate"] else 201)
            placed = await ctx.enqueues.submit((caller.actor, job))
    except InvalidJob as exc:
        raise locate(exc, "body") from None
    # `job_document.with_key(document, "duplicate", ...)`, its tail encoded once, not per request.
    tail = _DUPLICATE_TAIL[placed.duplicate]
    if job.debounce is not None:
        tail = tail[:-1] + _DEBOUNCED_TAIL[placed.debounced]
    tail = tail[:-1] + (job_document.with_key("{}", "warnings", warnings)[1:] if warnings else _NO_WARNINGS_TAIL)
    return Response(placed.document[:-1] + tail,
                    status_code=200 if placed.duplicate else 201, media_type="application/json")


_DUPLICATE_TAIL = {dup: job_document.with_key("{}", "duplicate", dup)[1:] for dup in (False, True)}
_DEBOUNCED_TAIL = {deb: job_document.with_key("{}", "debounced", deb)[1:] for deb in (False, True)}
_NO_WARNINGS_TAIL = job_document.with_key("{}", "warnings", [])[1:]


def _cursor(text: str | None) -> int | None:
    if text is None:
        return None
    if not text.isdigit() or len(text) > 19:
        raise ApiError(422, "invalid", "query.cursor: not a cursor from a previous page")
    return int(text)


@router.get("", response_model=JobPage, responses=ERRORS)
async def list_jobs(caller: Caller = Depends(require("read")),
                    status: Annotated[list[Status] | None, Query()] = None,
                    type: Annotated[str | None, Query(max_length=255)] = None,
                    pipeline_id: Annotated[str | None, Query(max_length=36)] = None,
                    user_id: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
                    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
                    cursor: Annotated[str | None, Query(max_length=20)] = None,
                    q: Annotated[str | None, Query(max_length=MAX_QUERY)] = None) -> Response:
    """`q` is the console's search: free text and terms (`error:"timeout" input.user.plan:business`)."""
    filt = JobFilter(statuses=frozenset(status or ()), type=type, pipeline_id=pipeline_id, user_id=user_id)
    if q:
        parsed = parse_search(q, filt)
        if parsed.errors:
            raise ApiError(422, "invalid", f"query.q: {'; '.join(parsed.errors)}")
        filt = parsed.filter  # a user's token still sees only its own jobs (the service's scope)
    records, next_seq = await caller.service.job_records_page(filt, before_seq=_cursor(cursor), limit=limit)
    return _json({"items": [job_json(r) for r in records],
                  "next_cursor": str(next_seq) if next_seq is not None else None})


class WaitQuery(BaseModel):
    """The long-poll's query parameters of `GET /api/jobs/{id}`."""

    wait: float | None = Field(None, ge=0, le=MAX_WAIT_S, title="Wait")
    status: Status | None = Field(None, title="Status")


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    """The OpenAPI parameters of a model's fields, as FastAPI would declare them."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return [{"name": name, "in": "query", "required": False, "schema": field}
            for name, field in schema["properties"].items()]


def _wait_query(request: Request) -> WaitQuery | None:
    """The long-poll parameters, read by hand: FastAPI re-derives each declared parameter on every
    request, which cost the plain GET (the polled route) about a fifth of its time. With no
    query string there is nothing to read. Errors are the 422 FastAPI gives (`query.wait: ...`)."""
    if not request.scope.get("query_string"):
        return None
    try:
        return WaitQuery.model_validate({k: v for k, v in request.query_params.items() if k in WaitQuery.model_fields})
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]) from None


_JOB_ID_PARAMETER = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string", "title": "Job Id"}}


@router.get("/{job_id}", response_model=JobDetailOut, responses=ERRORS,
            openapi_extra={"parameters": [_JOB_ID_PARAMETER, *_query_parameters(WaitQuery)]})
@guarded_by("read")
async def get_job(request: Request) -> Response:
    """With `wait=S`, holds the request until the job's status differs from `status` (or from
    its status at arrival), at most S seconds, then answers as without it."""
    # The polled route: its caller and parameters are read by hand, as FastAPI's solving of
    # declared ones cost a fifth of its time (`guarded_by` and the parameters above document them).
    caller = await authorize(request, "read")
    job_id: str = request.path_params["job_id"]
    query = _wait_query(request)
    if query is None or not query.wait:
        ctx = request.app.state.ctx
        return Response(await ctx.reads.submit((caller.service, job_id)), media_type="application/json")
    wait, status = query.wait, query.status
    hub = request.app.state.ctx.hub
    deadline = time.monotonic() + wait
    service = caller.service.on_primary()  # woken by the primary's notifications: read where they come from
    with hub.subscribe(job_id) as changed:
        detail = await service.job_detail(job_id)
        target = status or detail.job.status
        while detail.job.status == target and not hub.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            changed.clear()
            try:
                async with asyncio.timeout(min(remaining, 5.0)):
                    await changed.wait()
            except TimeoutError:
                pass
            detail = await service.job_detail(job_id)
    return _json(detail_json(detail))


@router.get("/{job_id}/events", responses={**ERRORS, 200: {"content": {"text/event-stream": {}}}},
            response_class=StreamingResponse)
async def job_events(job_id: str, request: Request, caller: Caller = Depends(require("read")),
                     last_event_id: Annotated[str | None, Header(max_length=64)] = None) -> Response:
    """Server-Sent Events: one `status` event with the job now and after every change (its
    progress too); the stream ends after a terminal status. `Last-Event-ID` skips the state already seen."""
    hub = request.app.state.ctx.hub
    service = caller.service.on_primary()  # woken by the primary's notifications: read where they come from
    first = await service.job_detail(job_id)  # 404 before the stream starts

    async def stream() -> AsyncIterator[str]:
        seen = last_event_id
        quiet_since = time.monotonic()
        with hub.subscribe(job_id) as changed:
            # A change between the first read and this subscription woke nobody: read again at once.
            changed.set()
            detail = first
            while True:
                if version(detail) != seen:
                    seen, quiet_since = version(detail), time.monotonic()
                    yield f"id: {seen}\nevent: status\ndata: {json.dumps(detail_json(detail))}\n\n"
                if detail.job.status in TERMINAL_STATUSES or hub.stopping.is_set():
                    return
                # Without LISTEN the hub sees status changes only: a running job's progress is read again.
                polling = detail.job.status == Status.IN_PROGRESS and not hub.listening
                try:
                    async with asyncio.timeout(PROGRESS_POLL_S if polling else KEEP_ALIVE_S):
                        await changed.wait()
                except TimeoutError:
                    if time.monotonic() - quiet_since >= KEEP_ALIVE_S:
                        quiet_since = time.monotonic()
                        yield ": keep-alive\n\n"
                changed.clear()
                try:
                    detail = await service.job_detail(job_id)
                except Exception as exc:  # noqa: BLE001 - the stream ends; the client reconnects
                    log.debug("job %s: event stream ended, its state could not be read: %s", job_id, exc)
                    return

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _detail_after(caller: Caller, job_id: str) -> Response:
    """The job after an action, read on the primary: a read replica may not have the change yet."""
    return _json(detail_json(await caller.service.on_primary().job_detail(job_id)))


@router.post("/{job_id}/cancel", response_model=JobDetailOut, responses=ERRORS)
async def cancel_job(job_id: str, caller: Caller = Depends(require("operate"))) -> Response:
    await caller.service.cancel([job_id])
    return await _detail_after(caller, job_id)


@router.post("/{job_id}/retry", response_model=JobDetailOut, responses=ERRORS)
async def retry_job(request: Request, job_id: str, fresh: bool = False, body: RetryIn | None = None,
                    caller: Caller = Depends(require("operate"))) -> Response:
    """`?fresh=true` retries from scratch: a durable processor's stored steps are forgotten. A
    body `{"input_data": {...}}` retries with that input (checked against the processor's input
    model where the server loaded it); the change and the retry are one transaction."""
    if body is None:
        await caller.service.retry([job_id], fresh=fresh)
    else:
        try:
            await caller.service.retry_with_input(job_id, body.input_data, fresh=fresh,
                                                  validate=request.app.state.ctx.validate_input)
        except (InvalidJob, ValueError) as exc:
            raise locate(InvalidJob(str(exc), field="input_data"), "body") from None
    return await _detail_after(caller, job_id)


@router.post("/{job_id}/approve", response_model=JobDetailOut, responses=ERRORS)
async def approve_job(job_id: str, caller: Caller = Depends(require("approve"))) -> Response:
    await caller.service.approve([job_id])
    return await _detail_after(caller, job_id)


@router.post("/{job_id}/reject", response_model=JobDetailOut, responses=ERRORS)
async def reject_job(job_id: str, body: RejectIn, caller: Caller = Depends(require("approve"))) -> Response:
    try:
        await caller.service.reject([job_id], body.reason)
    except InvalidJob as exc:
        raise locate(InvalidJob(str(exc), field="reason"), "body") from None
    return await _detail_after(caller, job_id)

