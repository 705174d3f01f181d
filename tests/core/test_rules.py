"""The pure rules of statuses and the checks of a new job, without a database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import JobCreate, Status
from jobdesk.core.rules import (
    BULK_ACTIONS,
    LEGAL_FROM,
    WORKER_COMMANDS_LEGAL_FROM,
    Actor,
    format_exception,
    is_legal,
    retry_decision,
    worker_command_is_legal,
)
from jobdesk.core.validation import check_new_job, check_new_jobs, json_text, storable_text
from jobdesk.store import fleet, transitions


def test_operator_actions_start_from_these_statuses() -> None:
    assert is_legal("cancel", Status.IN_PROGRESS) and is_legal("cancel", "queued")
    assert is_legal("retry", "failed") and is_legal("retry", Status.CANCELLED)
    assert not is_legal("retry", "completed") and not is_legal("cancel", "completed")
    assert all(is_legal(a, "waiting_approval") for a in ("approve", "reject", "cancel"))
    assert set(BULK_ACTIONS) <= set(LEGAL_FROM)


def test_worker_command_legality_is_one_table() -> None:
    legal = WORKER_COMMANDS_LEGAL_FROM
    assert set(legal) == set(fleet.COMMANDS) == {"pause", "resume", "drain", "stop"}
    assert worker_command_is_legal("resume", "paused")
    assert not worker_command_is_legal("resume", "running")
    assert not worker_command_is_legal("pause", "paused")
    assert not worker_command_is_legal("drain", "draining")
    assert all(not worker_command_is_legal(c, s) for c in legal for s in ("lost", "stopped"))
    assert not worker_command_is_legal("reboot", "running")


def test_the_store_applies_the_same_rules() -> None:
    assert transitions.LEGAL_FROM is LEGAL_FROM and transitions.is_legal is is_legal
    assert transitions.worker_command_is_legal is worker_command_is_legal and transitions.Actor is Actor


def test_n_intervals_mean_n_retries() -> None:
    intervals = [1.0, 5.0]
    assert retry_decision(0, intervals, permanent=False) == (Status.QUEUED, 1, 1.0)
    assert retry_decision(1, intervals, permanent=False) == (Status.QUEUED, 2, 5.0)
    assert retry_decision(2, intervals, permanent=False) == (Status.FAILED, 2, None)
    assert retry_decision(0, intervals, permanent=True) == (Status.FAILED, 0, None)
    assert retry_decision(0, [], permanent=False) == (Status.FAILED, 0, None)


def test_json_text_refuses_what_jsonb_cannot_store() -> None:
    assert json_text({}) == "{}" and json_text([]) == "[]"
    assert json_text({"a": "é"}) == '{"a": "é"}'
    assert json_text({"a": "\\u0000"}) == '{"a": "\\\\u0000"}'  # an escaped backslash, not a NUL
    for bad in ({"a": "\x00"}, {"a": "\ud800"}, {"a": object()}):
        with pytest.raises(InvalidJob) as info:
            json_text(bad, "input_data", job_id="j1", field="input_data")
        assert info.value.field == "input_data"


def test_storable_text() -> None:
    assert storable_text("plain") and storable_text("é ✓")
    assert not storable_text("a\x00b") and not storable_text("\udfff")


@pytest.mark.parametrize("job, field", [
    (JobCreate("", {}), "type"),
    (JobCreate("t" * 256, {}), "type"),
    (JobCreate("t", {}, id="x" * 37), "id"),
    (JobCreate("t", [], id="j"), "input_data"),  # type: ignore[arg-type]
    (JobCreate("t", {}, dependent_on_jobs=[1]), "dependent_on_jobs"),  # type: ignore[list-item]
    (JobCreate("t", {}, pipeline_id="p" * 37), "pipeline_id"),
    (JobCreate("t", {}, unique_key=""), "unique_key"),
    (JobCreate("t", {}, unique_key="k" * 256), "unique_key"),
    (JobCreate("t", {}, unique_key="k\x00"), "unique_key"),
    (JobCreate("t\x00", {}), "type"),
    (JobCreate("t", {}, scheduled_at="tomorrow"), "scheduled_at"),  # type: ignore[arg-type]
    (JobCreate("t", {}, priority=2**31), "priority"),
    (JobCreate("t", {}, priority=True), "priority"),
    (JobCreate("t", {}, priority="high"), "priority"),  # type: ignore[arg-type]
    (JobCreate("t", {}, user_id=-(2**31) - 1), "user_id"),
    (JobCreate("t", {}, user_id="1"), "user_id"),  # type: ignore[arg-type]
])
def test_a_malformed_new_job_is_refused_naming_its_field(job: JobCreate, field: str) -> None:
    with pytest.raises(InvalidJob) as info:
        check_new_job(job)
    assert info.value.field == field
    # In a batch, the same refusal, whichever way the batch is checked.
    batch = [JobCreate("t", {"n": i}, id=f"ok-{i}", dependent_on_jobs=[f"ok-{i - 1}"] if i else [],
                       pipeline_id="p", user_id=2, priority=-3, unique_key=f"k{i}" if i % 2 else None)
             for i in range(50)]
    check_new_jobs(batch)
    batch.insert(30, job)
    with pytest.raises(InvalidJob) as in_batch:
        check_new_jobs(batch)
    assert (in_batch.value.field, str(in_batch.value)) == (field, str(info.value))


def test_the_first_bad_job_of_a_batch_is_the_one_named() -> None:
    batch = [JobCreate("t", {}, id=f"j{i}") for i in range(10)]
    batch[3].type, batch[7].id = "", "x" * 40
    with pytest.raises(InvalidJob, match="non-empty type") as info:
        check_new_jobs(batch)
    assert info.value.job_id == "j3"
    check_new_jobs(batch[:3] + batch[4:7])  # the good ones pass


def test_a_new_jobs_time_becomes_utc() -> None:
    job = JobCreate("t", {}, scheduled_at=datetime(2030, 1, 1, 12, 0))
    check_new_job(job)
    assert job.scheduled_at is not None and job.scheduled_at.tzinfo is UTC


def test_format_exception_gives_one_line_and_the_traceback() -> None:
    try:
        raise ValueError("bad input")
    except ValueError as exc:
        line, trace = format_exception(exc)
    assert line == "ValueError: bad input"
    assert trace.startswith("Traceback") and "bad input" in trace
    assert format_exception(KeyboardInterrupt())[0] == "KeyboardInterrupt"


def test_actor_names_its_source() -> None:
    actor = Actor.current("cli")
    assert actor.source == "cli" and actor.name is None
