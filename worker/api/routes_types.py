"""/api/types: every known job type with its limits in force and its activity at a glance;
pausing and resuming a type across the fleet, and setting its limits and rates at run time."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field

from jobdesk.api.auth import Caller, require
from jobdesk.api.errors import ApiError
from jobdesk.api.routes_jobs import ERRORS
from jobdesk.core.errors import InvalidJob
from jobdesk.core.type_controls import TypeControl
from jobdesk.service.types import REASON_MAX

router = APIRouter(prefix="/api/types", tags=["types"])


class TypeOut(BaseModel):
    type: str
    paused: bool
    paused_by: str | None = Field(description="who paused it: the token's name, or the OS user of the CLI")
    paused_at: str | None = Field(description="ISO 8601")
    reason: str | None
    limit: int | None = Field(description="jobs of the type in progress across the fleet; null: no limit")
    limit_source: str | None = Field(description='"env JOB_TYPE_LIMITS" or "database (set by NAME)"')
    rate: str | None = Field(description="starts across the fleet, like 10/s")
    rate_source: str | None
    user_limit: int | None = Field(description="jobs in progress per user")
    user_limit_source: str | None
    user_rate: str | None = Field(description="starts per user, like 2/s")
    user_rate_source: str | None
    fair_share: bool
    running: int = Field(description="jobs of the type in progress now")
    queued: int = Field(description="jobs of the type ready to run now, counted up to 10,000")
    queued_capped: bool = Field(description="true: more jobs are ready than `queued` says")
    throughput: list[int] = Field(description="jobs finished (completed or failed for good) in each 5 s of the "
                                              "last 5 minutes: 60 counts, oldest first")
    failed: list[int] = Field(description="attempts failed (retried or not) in each 5 s of the last 5 minutes: "
                                          "60 counts, oldest first")


class TypesOut(BaseModel):
    types: list[TypeOut]


class PauseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str | None = Field(None, max_length=REASON_MAX, description="why, for the audit log and waiting reasons")


class LimitsIn(BaseModel):
    """Each limit given is set; null clears it (the JOB_* setting is in force again); one left out
    is not changed."""

    # Strict: `true` is not a limit of 1, nor 2.0 a limit of 2.
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "example": {"limit": 2, "rate": "10/s", "user_limit": None, "user_rate": None}})
    limit: int | None = Field(None, description="jobs of the type in progress across the fleet, 0 or more")
    rate: str | None = Field(None, description="starts across the fleet: N/s, N/m or N/h")
    user_limit: int | None = Field(None, description="jobs in progress per user, 0 or more")
    user_rate: str | None = Field(None, description="starts per user: N/s, N/m or N/h")


def _out(record: TypeControl) -> TypeOut:
    return TypeOut.model_validate(record.to_json())


def _operator(caller: Caller) -> None:
    """Types belong to the operators: a token bound to a user cannot pause or limit them."""
    if caller.user_id is not None:
        raise ApiError(403, "forbidden", "job types are the operators': this token is bound to a user")


async def _checked(call: Awaitable[TypeControl]) -> TypeOut:
    """The answer of a change; a refused input is a 422 naming the field (nothing was written)."""
    try:
        return _out(await call)
    except InvalidJob as exc:
        where = "path.type" if exc.field == "type" else "body"
        raise ApiError(422, "invalid", f"{where}: {exc}") from None


@router.get("", response_model=TypesOut, responses=ERRORS)
async def list_types(caller: Caller = Depends(require("read"))) -> TypesOut:
    return TypesOut(types=[_out(r) for r in await caller.service.types()])


@router.post("/{type}/pause", response_model=TypeOut, responses=ERRORS)
async def pause_type(type: str, body: Annotated[PauseIn | None, Body()] = None,
                     caller: Caller = Depends(require("operate"))) -> TypeOut:
    _operator(caller)
    return await _checked(caller.service.on_primary().pause_type(type, body.reason if body else None))


@router.post("/{type}/resume", response_model=TypeOut, responses=ERRORS)
async def resume_type(type: str, caller: Caller = Depends(require("operate"))) -> TypeOut:
    _operator(caller)
    return await _checked(caller.service.on_primary().resume_type(type))


@router.put("/{type}/limits", response_model=TypeOut, responses=ERRORS)
async def set_type_limits(type: str, body: LimitsIn, caller: Caller = Depends(require("operate"))) -> TypeOut:
    _operator(caller)
    changes: dict[str, Any] = {name: getattr(body, name) for name in body.model_fields_set}
    return await _checked(caller.service.on_primary().set_type_limits(type, changes))
