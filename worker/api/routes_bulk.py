"""/api/jobs/retry and /api/jobs/cancel: act on every job that matches a filter, in chunks of at
most 1,000 jobs per transaction (one audit row each), or count them first with `dry_run`."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from jobdesk.api.auth import Caller, require
from jobdesk.api.routes_jobs import ERRORS
from jobdesk.core.models import Status
from jobdesk.store.jobs import JobFilter

router = APIRouter(prefix="/api/jobs", tags=["bulk"])


class BulkIn(BaseModel):
    """Which jobs: every field given narrows the match; none given means every job the action
    applies to (retry: failed and cancelled; cancel: queued, running, waiting for approval)."""

    model_config = ConfigDict(extra="forbid")
    status: list[Status] = Field(default_factory=list, description="any of these statuses")
    type: str | None = Field(None, min_length=1, max_length=255)
    pipeline_id: str | None = Field(None, min_length=1, max_length=36)
    user_id: int | None = Field(None, ge=1, le=2_147_483_647)
    dry_run: bool = Field(False, description="only count the jobs it would act on")


class BulkOut(BaseModel):
    action: str
    filter: str = Field(description="the filter in words")
    dry_run: bool
    count: int = Field(description="jobs matched and acted on (with dry_run: that would be)")
    capped: bool = Field(description="counting stopped at `count`: there are more")
    changed: int = Field(description="jobs changed, cancelled dependants included")
    chunks: int = Field(description="transactions, each with one audit row")


async def _bulk(action: str, body: BulkIn, caller: Caller) -> BulkOut:
    filt = JobFilter(statuses=frozenset(body.status), type=body.type, pipeline_id=body.pipeline_id,
                     user_id=body.user_id)
    result = await caller.service.bulk(action, filt, dry_run=body.dry_run)
    return BulkOut(action=action, filter=filt.describe(), dry_run=result.dry_run, count=result.count,
                   capped=result.capped, changed=result.changed, chunks=result.chunks)


@router.post("/retry", response_model=BulkOut, responses=ERRORS)
async def retry_matching(body: BulkIn, caller: Caller = Depends(require("operate"))) -> BulkOut:
    """Retry every failed or cancelled job that matches."""
    return await _bulk("retry", body, caller)


@router.post("/cancel", response_model=BulkOut, responses=ERRORS)
async def cancel_matching(body: BulkIn, caller: Caller = Depends(require("operate"))) -> BulkOut:
    """Cancel every queued, running or waiting job that matches, and what depends on them."""
    return await _bulk("cancel", body, caller)
