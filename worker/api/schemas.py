"""Request and response bodies, as the OpenAPI document describes them."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from jobdesk.core.validation import MAX_DEBOUNCE_S


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobIn(Strict):
    type: str = Field(min_length=1, max_length=255)
    input_data: dict[str, Any]
    dependent_on_jobs: list[str] = Field(default_factory=list)
    pipeline_id: str | None = Field(None, min_length=1, max_length=36)
    user_id: int | None = Field(None, ge=1, le=2**31 - 1)
    priority: int = Field(0, ge=-(2**31), le=2**31 - 1)
    scheduled_at: AwareDatetime | None = None  # runs no earlier than this (ISO 8601 with an offset)
    unique_key: str | None = Field(None, min_length=1, max_length=255)
    # Seconds (needs unique_key): a queued job holding the key that has not started takes this
    # input_data and starts this long from now; `debounce_max` caps the move from its first enqueue.
    debounce: float | None = Field(None, gt=0, le=MAX_DEBOUNCE_S)
    debounce_max: float | None = Field(None, gt=0, le=MAX_DEBOUNCE_S)


class PipelineJobIn(Strict):
    id: str | None = Field(None, min_length=1, max_length=36)
    type: str = Field(min_length=1, max_length=255)
    input_data: dict[str, Any]
    dependent_on_jobs: list[str] = Field(default_factory=list)
    priority: int = Field(0, ge=-(2**31), le=2**31 - 1)
    scheduled_at: AwareDatetime | None = None
    # A job whose key an unfinished job holds is not created: its id in `job_ids` is that job's,
    # and jobs of the body that depend on it depend on that job.
    unique_key: str | None = Field(None, min_length=1, max_length=255)


class PipelineIn(Strict):
    pipeline_id: str | None = Field(None, min_length=1, max_length=36)
    jobs: list[PipelineJobIn] = Field(min_length=1, max_length=5000)


class RetryIn(Strict):
    # The job runs again with this input instead of its own; the old input is kept in the audit log.
    input_data: dict[str, Any]


class RejectIn(Strict):
    reason: str = Field(min_length=1, pattern=r"\S")


class AttemptOut(BaseModel):
    attempt: int
    worker_id: str | None
    started_at: str | None
    finished_at: str
    outcome: str
    error_message: str | None
    traceback: str | None


class JobOut(BaseModel):
    id: str
    type: str
    status: str
    user_id: int | None
    pipeline_id: str | None
    input_data: dict[str, Any]
    result_data: Any
    error_message: str | None
    dependent_on_jobs: list[str]
    retry_count: int
    next_retry_at: str | None
    is_active: bool
    created_at: str
    updated_at: str
    completed_at: str | None
    priority: int
    worker_id: str | None
    started_at: str | None
    scheduled_at: str | None
    unique_key: str | None


class JobCreatedOut(JobOut):
    duplicate: bool  # true: an unfinished job held the unique key; this is that job, nothing was created
    debounced: bool = False  # true (with debounce): that queued job took this input and its new start
    # Said, not refused: "no live worker serves TYPE..." when live workers serve other types only
    warnings: list[str] = Field(default_factory=list)


class DurableStepOut(BaseModel):
    """A step a durable processor stored (`job.step`), or one of its sleeps and waits ("@...")."""

    name: str
    result: Any
    attempt: int
    started_at: str
    finished_at: str
    duration_s: float


class JobProgressOut(BaseModel):
    fraction: float  # from 0 to 1
    message: str | None
    at: str  # when the processor reported it (ISO 8601, UTC)


class JobDetailOut(JobOut):
    attempts: list[AttemptOut]
    steps: list[DurableStepOut]  # a durable processor's stored steps, in the order they finished
    progress: JobProgressOut | None  # the last progress the processor reported; null if none (or retried since)
    waiting_reason: str | None  # why a queued job has not started; null when it is not queued


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None


class PipelineCreated(BaseModel):
    pipeline_id: str
    job_ids: list[str]


class Progress(BaseModel):
    completed: int
    total: int


class StepOut(BaseModel):
    id: str
    type: str
    status: str
    dependent_on_jobs: list[str]
    retry_count: int
    started_at: str | None
    completed_at: str | None
    error_message: str | None


class PipelineOut(BaseModel):
    pipeline_id: str
    name: str
    status: str
    progress: Progress
    jobs: list[StepOut]


class ChangedJobs(BaseModel):
    job_ids: list[str]
    jobs: list[JobOut] = Field(description="the jobs changed, as they are after the action, in the order of job_ids")


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    error: ErrorBody


class Health(BaseModel):
    status: str


class Ping(BaseModel):
    pong: bool
