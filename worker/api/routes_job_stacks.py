"""/api/jobs/{id}/stack: what a running job is doing now, its stack; after it ended, the last one taken."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from jobdesk.api.auth import Caller, require
from jobdesk.api.schemas import ErrorOut
from jobdesk.core.json_value import JsonObject

router = APIRouter(prefix="/api/jobs", tags=["jobs"])

ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut} for code in (401, 403, 404, 409, 422, 500, 503,
                                                                                   504)}


class StackFrameOut(BaseModel):
    file: str
    line: int
    function: str
    source: str  # the line's source, stripped; empty when the file cannot be read


class JobStackOut(BaseModel):
    job_id: str
    attempt: int  # the attempt the stack was taken in
    worker_id: str  # the worker that took it
    taken_at: str  # when (ISO 8601)
    running: bool  # true: taken just now from the running job; false: the last one kept, the job has ended since
    status: str  # the job's status now
    frames: list[StackFrameOut]  # outermost first, innermost last, as a traceback prints them


@router.get("/{job_id}/stack", response_model=JobStackOut, responses=ERRORS)
async def job_stack(job_id: str, caller: Caller = Depends(require("read"))) -> JsonObject:
    """The running job's current Python stack, asked of the worker that runs it (within 5 s):
    outermost frame first. For a job that runs no more, the last stack taken of it, with
    `running` false. 404 for an unknown job, 409 `not_running` for a job that does not run and
    has no stack kept, 504 `worker_not_answering` when its worker does not answer in time."""
    stack = await caller.service.job_stack(job_id)
    return stack.to_json()
