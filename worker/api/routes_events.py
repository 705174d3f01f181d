"""/api/events: emit the events that durable jobs wait for (`job.wait_for_event`)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field

from jobdesk.api.auth import Caller, require
from jobdesk.api.routes_jobs import ERRORS, locate
from jobdesk.core.errors import InvalidJob

router = APIRouter(prefix="/api/events", tags=["events"])


class EventIn(BaseModel):
    key: str = Field(min_length=1, max_length=255, description="what the jobs wait on, e.g. upload-done:42")
    payload: Any = Field(None, description="any JSON; the waiting jobs receive it")


class EventOut(BaseModel):
    key: str
    first: bool = Field(description="true: this emit was the key's first, whose payload the jobs receive; "
                                    "false: the key was emitted before, and nothing changed")


@router.post("", response_model=EventOut, status_code=201, responses={**ERRORS, 200: {"model": EventOut}})
async def emit_event(body: EventIn, caller: Caller = Depends(require("events"))) -> Response:
    """Emit an event: every job waiting on its key wakes, and a job that waits on it later finds
    it at once. 201 for the key's first emit; 200 when it was emitted before (nothing changes)."""
    try:
        first = await caller.service.emit_event(body.key, body.payload)
    except InvalidJob as exc:
        raise locate(exc, "body") from None
    return Response(json.dumps({"key": body.key, "first": first}), status_code=201 if first else 200,
                    media_type="application/json")
