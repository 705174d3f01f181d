"""/api/pipelines: create a pipeline, read its step indicator, cancel it, retry its failures."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response

from jobdesk.api.auth import Caller, require
from jobdesk.api.render import job_json, pipeline_json
from jobdesk.api.routes_jobs import ERRORS, _json, locate
from jobdesk.api.schemas import ChangedJobs, PipelineCreated, PipelineIn, PipelineOut
from jobdesk.core import tracing
from jobdesk.core.errors import InvalidJob
from jobdesk.core.json_value import JsonObject
from jobdesk.core.models import JobCreate, JobRecord
from jobdesk.store.idempotency import fingerprint

router = APIRouter(prefix="/api/pipelines", tags=["pipelines"])


@router.post("", status_code=201, response_model=PipelineCreated,
             responses={**ERRORS, 200: {"model": PipelineCreated}})
async def create_pipeline(body: PipelineIn, request: Request, caller: Caller = Depends(require("submit")),
                          idempotency_key: Annotated[str | None, Header(max_length=255)] = None) -> Response:
    """All or nothing; a job may depend on the ids of other jobs of the same body."""
    pipeline_id = body.pipeline_id or str(uuid.uuid4())
    jobs: list[JobCreate] = []
    for spec in body.jobs:
        job = JobCreate(spec.type, spec.input_data, dependent_on_jobs=list(spec.dependent_on_jobs),
                        user_id=caller.user_id, pipeline_id=pipeline_id, priority=spec.priority,
                        scheduled_at=spec.scheduled_at, unique_key=spec.unique_key)
        if spec.id is not None:
            job.id = spec.id
        jobs.append(job)
    index = {job.id: i for i, job in enumerate(jobs)}
    validate = request.app.state.ctx.validate_input
    for i, job in enumerate(jobs):
        try:
            validate(job.type, job.input_data)
        except (InvalidJob, ValueError) as exc:
            raise locate(InvalidJob(str(exc), field=f"jobs[{i}].input_data"), "body") from None

    def render(records: list[JobRecord]) -> JsonObject:
        return {"pipeline_id": pipeline_id, "job_ids": [r.id for r in records]}

    try:
        with tracing.enqueueing(jobs, incoming=lambda: request.headers):
            if idempotency_key:
                done = await caller.service.enqueue_once(
                    caller.owner, idempotency_key, fingerprint("POST /api/pipelines", body.model_dump(mode="json")),
                    jobs, render)
                return _json(done.body, 200 if done.replayed else 201)
            records = await caller.service.enqueue_records(jobs)
    except InvalidJob as exc:
        raise locate(exc, "body", index) from None
    return _json(render(records), 201)


@router.get("/{pipeline_id}", response_model=PipelineOut, responses=ERRORS)
async def get_pipeline(pipeline_id: str, caller: Caller = Depends(require("read"))) -> Response:
    """The step indicator: derived status, progress, and the jobs in dependency order."""
    return _json(pipeline_json(await caller.service.pipeline_steps(pipeline_id)))


async def _changed(caller: Caller, job_ids: list[str]) -> Response:
    """The jobs an action changed: their ids, and each job as it is now (read on the primary,
    which has the change; a read replica may not have it yet)."""
    records = await caller.service.on_primary().job_records(job_ids)
    return _json({"job_ids": job_ids, "jobs": [job_json(r) for r in records]})


@router.post("/{pipeline_id}/cancel", response_model=ChangedJobs, responses=ERRORS)
async def cancel_pipeline(pipeline_id: str, caller: Caller = Depends(require("operate"))) -> Response:
    return await _changed(caller, await caller.service.cancel_pipeline(pipeline_id))


@router.post("/{pipeline_id}/retry-failed", response_model=ChangedJobs, responses=ERRORS)
async def retry_failed(pipeline_id: str, caller: Caller = Depends(require("operate"))) -> Response:
    await caller.service.on_primary().pipeline_steps(pipeline_id)  # 404 for an unknown pipeline
    return await _changed(caller, await caller.service.retry_pipeline(pipeline_id))
