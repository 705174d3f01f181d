"""Jobs and pipelines as JSON; timestamps are ISO 8601 in UTC."""

from __future__ import annotations

from datetime import UTC, datetime

from jobdesk.core.json_value import JsonObject
from jobdesk.core.models import JobRecord
from jobdesk.service.jobs import Attempt, JobDetail, PipelineSteps
from jobdesk.store.job_document import ATTEMPT_KEYS, JOB_KEYS


def iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def job_json(job: JobRecord) -> JsonObject:
    out: JsonObject = {}
    for name in JOB_KEYS:
        value = getattr(job, name)
        out[name] = iso(value) if isinstance(value, datetime) else (str(value) if name == "status" else value)
    return out


def attempt_json(a: Attempt) -> JsonObject:
    values = ((name, getattr(a, name)) for name in ATTEMPT_KEYS)
    return {name: iso(value) if isinstance(value, datetime) else value for name, value in values}


def detail_json(detail: JobDetail) -> JsonObject:
    return {**job_json(detail.job), "attempts": [attempt_json(a) for a in detail.attempts],
            "steps": [s.to_json() for s in detail.steps],
            "progress": detail.progress.to_json() if detail.progress is not None else None,
            "waiting_reason": detail.waiting_reason}


def version(detail: JobDetail) -> str:
    """An SSE event id: changes whenever the row does, or its progress."""
    stamp = int(detail.job.updated_at.timestamp() * 1_000_000)
    if detail.progress is None:
        return str(stamp)
    return f"{stamp}.{int(detail.progress.at.timestamp() * 1_000_000)}"




def pipeline_json(p: PipelineSteps) -> JsonObject:
    return {"pipeline_id": p.pipeline_id, "name": p.name, "status": p.status,
            "progress": {"completed": p.completed, "total": p.total},
            "jobs": [{"id": s.id, "type": s.type, "status": str(s.status), "dependent_on_jobs": s.dependent_on_jobs,
                      "retry_count": s.retry_count, "started_at": iso(s.started_at),
                      "completed_at": iso(s.completed_at), "error_message": s.error_message} for s in p.steps]}
