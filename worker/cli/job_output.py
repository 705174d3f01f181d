"""What `jobdesk jobs`, `show` and `submit` print for people (`--json` prints the records whole):
the table of jobs, one job with its history, steps and last traceback."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from jobdesk.cli.output import ago, cut, print_rows
from jobdesk.core.models import JobRecord, Status, short_id
from jobdesk.service.read_models import Attempt, JobProgress, StepRow


def print_table(records: list[JobRecord]) -> None:
    if not records:
        print("no jobs")
        return
    rows = [("ID", "TYPE", "STATUS", "TRIES", "CREATED", "ERROR")]
    for r in records:
        error = cut(r.error_message, 60) if r.error_message else ""
        status = f"scheduled {ago(r.scheduled_at)}" if is_scheduled(r) else r.status.value
        rows.append((short_id(r.id), cut(r.type, 24), status, str(r.retry_count), ago(r.created_at), error))
    print_rows(rows)


def is_scheduled(record: JobRecord) -> bool:
    """Queued with a scheduled time still to come."""
    return (record.status == Status.QUEUED and record.scheduled_at is not None
            and record.scheduled_at > datetime.now(UTC))


def when_text(at: datetime | None) -> str:
    return f"{at.astimezone():%Y-%m-%d %H:%M:%S %z} ({ago(at)})" if at else "-"


STEP_RESULT_WIDTH = 80  # a step's result is cut here in `show` (whole in `show --json`)


def progress_line(progress: JobProgress) -> str:
    """`40% rendered 40 of 100 frames (3 s ago)`: a job's last progress on one line."""
    message = f" {progress.message}" if progress.message else ""
    return f"{progress.fraction * 100:.0f}%{message} ({ago(progress.at)})"


def print_job(record: JobRecord, attempts: list[Attempt], dependants: list[str],
               waiting: str | None = None, steps: Sequence[StepRow] = (), progress: JobProgress | None = None) -> None:
    fields: list[tuple[str, object]] = [
        ("id", record.id), ("type", record.type), ("status", record.status.value),
        ("user", record.user_id), ("pipeline", record.pipeline_id or "-"),
        ("retries", record.retry_count), ("attempts", record.attempts),
        ("active", "yes" if record.is_active else "no"),
        ("created", f"{record.created_at:%Y-%m-%d %H:%M:%S} ({ago(record.created_at)})"),
        ("updated", f"{record.updated_at:%Y-%m-%d %H:%M:%S} ({ago(record.updated_at)})")]
    if record.completed_at:
        fields.append(("completed", f"{record.completed_at:%Y-%m-%d %H:%M:%S} ({ago(record.completed_at)})"))
    if record.scheduled_at:
        fields.append(("scheduled", when_text(record.scheduled_at)))
    if record.unique_key is not None:
        fields.append(("unique key", record.unique_key))
    if record.next_retry_at and record.status == Status.QUEUED:
        fields.append(("next retry", ago(record.next_retry_at)))
    if waiting:
        fields.append(("waiting", waiting))
    if progress is not None:
        fields.append(("progress", progress_line(progress)))
    if record.dependent_on_jobs:
        fields.append(("depends on", ", ".join(record.dependent_on_jobs)))
    if dependants:
        fields.append(("dependants", ", ".join(dependants)))
    if record.error_message:
        fields.append(("error", record.error_message))
    for key, value in fields:
        print(f"{key:>11}  {value}")
    print(f"{'input':>11}  {json.dumps(record.input_data)}")
    if record.result_data is not None:
        print(f"{'result':>11}  {json.dumps(record.result_data)}")
    if attempts:
        print("history:")
        for a in attempts:
            print(f"  #{a.attempt} {a.outcome:<11} {a.finished_at:%Y-%m-%d %H:%M:%S}  {a.error_message or ''}")
        _print_traceback(record, attempts[-1])
    if steps:
        print("steps:")
        for s in steps:
            result = cut(json.dumps(s.result), STEP_RESULT_WIDTH)
            print(f"  {s.name:<24} {s.finished_at.astimezone():%Y-%m-%d %H:%M:%S}  {s.duration_s:>8.3f} s  "
                  f"#{s.attempt}  {result}")


def _print_traceback(record: JobRecord, last: Attempt) -> None:
    """The last attempt's traceback, when that attempt is why the job failed or waits to retry
    (a job that completed after it, or was cancelled, has moved on from it)."""
    retrying = record.status == Status.QUEUED and record.retry_count > 0
    if last.traceback and (record.status == Status.FAILED or retrying):
        print(f"traceback of attempt #{last.attempt}:")
        for line in last.traceback.rstrip().splitlines():
            print(f"  {line}")
