"""/api/jobs/{id}/logs: a job's own log lines, as JSON or followed as Server-Sent Events."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from jobdesk.api.auth import Caller, require
from jobdesk.api.schemas import ErrorOut

log = logging.getLogger("jobdesk.api")
router = APIRouter(prefix="/api/jobs", tags=["jobs"])

KEEP_ALIVE_POLLS = 30  # a comment line after this many polls without a line (15 s)
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut} for code in (401, 403, 404, 422, 500, 503)}


class JobLogLineOut(BaseModel):
    attempt: int  # the attempt (run) that emitted it
    seq: int  # its order within the attempt, from 1
    at: str  # when it was emitted (ISO 8601, UTC)
    level: str  # DEBUG, INFO, WARNING, ERROR or CRITICAL
    logger: str  # the logger's name; `job` for job.log
    message: str
    trace_id: str | None  # the OpenTelemetry trace of the run, when traced
    span_id: str | None


class JobLogsOut(BaseModel):
    job_id: str
    lines: list[JobLogLineOut]


def _position(event_id: str | None) -> tuple[int, int]:
    """The line an event id (`attempt.seq`) names; the start for none, or for one not of ours."""
    attempt, _, seq = (event_id or "").partition(".")
    if not (attempt.isdigit() and seq.isdigit()):
        return (0, 0)
    return (int(attempt), int(seq))


@router.get("/{job_id}/logs", response_model=JobLogsOut, responses={
    **ERRORS, 200: {"content": {"application/json": {}, "text/event-stream": {}}}})
async def job_logs(job_id: str, request: Request, caller: Caller = Depends(require("read")),
                   follow: bool = Query(False, description="stream the lines as Server-Sent Events until the job "
                                                           "has finished"),
                   last_event_id: Annotated[str | None, Header(max_length=64)] = None) -> Response:
    """The log lines the job's processor emitted, every attempt's, in order. With
    `follow=true`, Server-Sent Events: one `log` event per line (its `id` is `attempt.seq`), as
    they are written, then one `end` event once the job has finished. A stream resumed with
    `Last-Event-ID` starts after that line."""
    service = caller.service
    if not follow:
        lines = await service.job_logs(job_id)
        return Response(json.dumps({"job_id": job_id, "lines": [ln.to_json() for ln in lines]}),
                        media_type="application/json")
    batches = service.follow_logs(job_id, after=_position(last_event_id))
    first = await anext(batches)  # 404 before the stream starts
    hub = request.app.state.ctx.hub

    async def stream() -> AsyncIterator[str]:
        batch, quiet = first, 0
        try:
            while True:
                for line in batch:
                    yield f"id: {line.attempt}.{line.seq}\nevent: log\ndata: {json.dumps(line.to_json())}\n\n"
                quiet = 0 if batch else quiet + 1
                if quiet >= KEEP_ALIVE_POLLS:
                    quiet = 0
                    yield ": keep-alive\n\n"
                if hub.stopping.is_set():
                    return
                try:
                    batch = await anext(batches)
                except StopAsyncIteration:
                    yield "event: end\ndata: {}\n\n"
                    return
        except Exception as exc:  # noqa: BLE001 - the stream ends; the client reconnects
            log.debug("job %s: log stream ended, its lines could not be read: %s", job_id, exc)
        finally:
            await batches.aclose()

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
