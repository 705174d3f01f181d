"""/api/schedules: the periodic jobs with their recent runs, pausing and resuming them, and a run now."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from jobdesk.api.auth import Caller, require
from jobdesk.api.errors import ApiError
from jobdesk.api.routes_jobs import ERRORS
from jobdesk.runtime.scheduler import ScheduleRecord

router = APIRouter(prefix="/api/schedules", tags=["schedules"])


class ScheduleRunOut(BaseModel):
    job_id: str
    status: str | None = Field(description="the job's status now; null once the job is deleted")
    tick_at: str = Field(description="ISO 8601: the tick it ran for, or when a run now was asked for")
    started_at: str | None = Field(description="ISO 8601: the start of its current attempt; null before it starts")
    duration_s: float | None = Field(description="from start to end; null until it ends")
    manual: bool = Field(description="true: asked for with POST .../run or `jobdesk schedule run`")


class ScheduleOut(BaseModel):
    name: str
    cron: str | None = Field(description="a cron expression, in `timezone`; or null for an interval")
    every_s: float | None = Field(description="the interval in seconds; or null for a cron expression")
    expression: str = Field(description="how it ticks, in short")
    description: str | None = Field(description='how it ticks, in words: "At 09:00, Monday through Friday"')
    timezone: str
    type: str
    input_data: dict[str, Any]
    priority: int
    misfire: str
    overlap: str
    paused: bool
    next_run_at: str | None = Field(description="ISO 8601, UTC; null while paused")
    last_run_at: str | None
    last_job_id: str | None
    source: str
    recent: list[ScheduleRunOut] = Field(description="its last 20 runs, oldest first")


class ScheduleRunNowOut(BaseModel):
    schedule: str
    job_id: str = Field(description="the job enqueued now")


def _out(record: ScheduleRecord) -> ScheduleOut:
    return ScheduleOut(**record.to_json())


def _operator(caller: Caller) -> None:
    """Schedules belong to the operators: a token bound to a user cannot pause or resume them."""
    if caller.user_id is not None:
        raise ApiError(403, "forbidden", "schedules are the operators': this token is bound to a user")


@router.get("", response_model=list[ScheduleOut], responses=ERRORS)
async def list_schedules(caller: Caller = Depends(require("read"))) -> list[ScheduleOut]:
    return [_out(r) for r in await caller.service.schedules()]


@router.post("/{name}/pause", response_model=ScheduleOut, responses=ERRORS)
async def pause_schedule(name: str, caller: Caller = Depends(require("operate"))) -> ScheduleOut:
    _operator(caller)
    return _out(await caller.service.pause_schedule(name))


@router.post("/{name}/resume", response_model=ScheduleOut, responses=ERRORS)
async def resume_schedule(name: str, caller: Caller = Depends(require("operate"))) -> ScheduleOut:
    _operator(caller)
    return _out(await caller.service.resume_schedule(name))


@router.post("/{name}/run", response_model=ScheduleRunNowOut, status_code=201, responses=ERRORS)
async def run_schedule(name: str, caller: Caller = Depends(require("operate"))) -> ScheduleRunNowOut:
    """Enqueue one run of the schedule now (paused or not); its next regular run does not move."""
    _operator(caller)
    return ScheduleRunNowOut(schedule=name, job_id=await caller.service.run_schedule(name))
