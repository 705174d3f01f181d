"""The objects processors and backends exchange with the engine."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from random import getrandbits
from typing import TYPE_CHECKING, Any, TypeVar

from jobdesk.core.errors import DurableUnavailable, NoJobResult
from jobdesk.core.job_report import DONE, LEVELS, JobReport, Reported, check_fraction, check_message
from jobdesk.core.json_value import JsonObject, JsonValue
from jobdesk.core.trace_ids import current_trace_ids

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pydantic import BaseModel

    from jobdesk.core.durable import DurableRun


class Status(StrEnum):
    """Job statuses, stored as these lowercase strings in `jobs.status`."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    WAITING_APPROVAL = "waiting_approval"


TERMINAL_STATUSES = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
# The statuses whose job has its processor's result: held for approval, it is stored already.
RESULT_STATUSES = frozenset({Status.COMPLETED, Status.WAITING_APPROVAL})

OutputT = TypeVar("OutputT", bound="BaseModel")  # pydantic loads with the processors that use it


_ID_RANDOM_BITS = (1 << 76) - 1 ^ 3 << 62  # the 76 bits after the version: all random but the variant's two
_ID_VARIANT = 1 << 63  # RFC 4122: the variant's two bits are 10
_id_head: tuple[int, str] = (-1, "")  # (millisecond, the id's text up to its version digit), swapped whole


def new_job_id() -> str:
    """A UUIDv7: 48 bits of milliseconds, then random bits. Time-ordered ids keep the primary
    key's hot pages few, which matters once the table holds millions of old jobs.

    The random bits come from `random`, seeded from the system's strong source at start-up and
    again in a forked child, not from a system call per id: 74 random bits per millisecond keep
    ids unique, and ids are not secrets (as the database's own, sql/025). The text of the
    millisecond is made once per millisecond. 0.8 us an id where the system call and a 128-bit
    format took 1.8."""
    global _id_head
    ms = time.time_ns() // 1_000_000
    head = _id_head
    if head[0] != ms:
        h = f"{ms & (1 << 48) - 1:012x}"
        head = _id_head = (ms, f"{h[:8]}-{h[8:]}-7")
    tail = f"{getrandbits(76) & _ID_RANDOM_BITS | _ID_VARIANT:019x}"
    return f"{head[1]}{tail[:3]}-{tail[3:7]}-{tail[7:]}"


def short_id(job_id: str | None) -> str:
    """The part of an id people read in a table: the random tail of a UUID (its head is a
    timestamp, the same for every job of the same minute), or a shortened custom id."""
    if not job_id:
        return ""
    if len(job_id) == 36 and job_id.count("-") == 4:
        return job_id[-8:]
    return job_id if len(job_id) <= 12 else job_id[:11] + "…"


@dataclass
class JobCreate:
    """A job to enqueue. `None` user or pipeline is inherited from the job that creates it."""

    type: str
    input_data: dict[str, Any]
    id: str = ""  # "": a new UUIDv7 (new_job_id)
    dependent_on_jobs: list[str] = field(default_factory=list)
    user_id: int | None = None
    pipeline_id: str | None = None
    priority: int = 0
    scheduled_at: datetime | None = None  # runs no earlier than this (timezone-aware)
    unique_key: str | None = None  # at most one unfinished job per key
    # Seconds: while the queued job holding unique_key has not started, an enqueue with the key
    # replaces its input_data and moves its start to now plus this.
    debounce: float | None = None
    debounce_max: float | None = None  # seconds from the first enqueue that the start may move to at most
    # The W3C trace context of the span that enqueued it ({"traceparent": ..., "tracestate": ...}),
    # set by the enqueue when tracing is on (jobdesk.core.tracing); its runs continue that trace.
    trace_context: dict[str, str] | None = None
    _made_id: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = self._made_id = new_job_id()

    @property
    def made_id(self) -> bool:
        """Whether the id is one new_job_id made for this job, given or changed by nobody: a
        UUIDv7 of 74 random bits, which no other job has (the insert skips looking for it)."""
        return bool(self._made_id) and self.id == self._made_id

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type, "input_data": self.input_data, "id": self.id,
            "dependent_on_jobs": list(self.dependent_on_jobs), "user_id": self.user_id,
            "pipeline_id": self.pipeline_id, "priority": self.priority,
            "scheduled_at": self.scheduled_at.isoformat() if self.scheduled_at else None,
            "unique_key": self.unique_key}
        if self.debounce is not None:
            out.update(debounce=self.debounce, debounce_max=self.debounce_max)
        if self.trace_context is not None:
            out["trace_context"] = self.trace_context
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobCreate:
        values = dict(data)
        if isinstance(values.get("scheduled_at"), str):
            values["scheduled_at"] = datetime.fromisoformat(values["scheduled_at"])
        return cls(**values)


@dataclass
class ProcessorResult:
    """What a processor returns: its result, jobs to create next, and whether to hold for approval."""

    result_data: dict[str, Any]
    next_jobs: list[JobCreate] = field(default_factory=list)
    requires_approval: bool = False


@dataclass(slots=True)
class Job:
    """A claimed job as a processor sees it."""

    id: str
    type: str
    input_data: dict[str, Any]
    user_id: int | None
    pipeline_id: str | None
    retry_count: int
    attempt: int = 1
    priority: int = 0
    cancel_event: asyncio.Event | None = None
    waited_s: float = 0.0  # from enqueue, or from the retry time, to this attempt's start
    run_s: float | None = None  # how long this attempt's processor ran, once it has returned
    durable: DurableRun | None = None  # made on the first durable call, by `durable_source`
    durable_source: Callable[[Job], DurableRun] | None = None  # set by the worker that runs the job
    trace_context: dict[str, str] | None = None  # of whoever enqueued it, when traced (jobs.trace_context)
    report: JobReport | None = None  # where this run's progress and log lines go, made on first use
    report_source: Callable[[Job], JobReport | None] | None = None  # set by the worker that runs the job

    @property
    def cancelled(self) -> bool:
        """True once an operator has cancelled this job; a processor may stop early."""
        return self.cancel_event is not None and self.cancel_event.is_set()

    # -- progress and log lines (docs/progress-and-logs.md) ---------------------------------

    def progress(self, fraction: float, message: str | None = None) -> Reported:
        """Record how far the job has got: `fraction` from 0 to 1 and an optional message.

        Recorded at once, from any thread; `await job.progress(...)` in async code and
        `job.progress(...)` in a thread both work. ValueError, with nothing recorded, for a
        fraction outside 0..1 or not a number. The worker writes the last value a few times a
        second at most, and always before the job's outcome."""
        value, text = check_fraction(fraction), check_message(message)
        report = self.current_report()
        if report is not None:
            report.set_progress(value, text)
        return DONE

    def log(self, message: str, level: str = "INFO") -> Reported:
        """Keep a log line with this job's attempt (as a `logging` record emitted during the run
        is kept). Works from any thread, with or without `await`; a line below JOB_LOG_LEVEL is
        not kept."""
        name = str(level).upper()
        if name not in LEVELS:
            raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
        report = self.current_report()
        if report is not None and LEVELS[name] >= report.min_level:
            trace_id, span_id = current_trace_ids()  # the run's span, as a logging record's line has
            report.add_line(name, "job", message if isinstance(message, str) else str(message), None,
                            trace_id, span_id)
        return DONE

    def current_report(self) -> JobReport | None:
        """This run's report, made on the first call (a job that reports nothing costs nothing);
        None outside a worker's run, and once the run has ended."""
        report, source = self.report, self.report_source
        if report is None and source is not None:
            report = source(self)
        return report

    # -- durable processors (docs/durable.md) -----------------------------------------------

    def _durable(self, call: str) -> DurableRun:
        if self.durable is None:
            if self.durable_source is None:
                raise DurableUnavailable(f"job.{call} needs a worker: job {self.id} is not run by one")
            self.durable = self.durable_source(self)
        return self.durable

    async def step(self, name: str, fn: Callable[..., object], *args: object, **kwargs: object) -> JsonValue:
        """Run `fn(*args, **kwargs)` (sync or async) once and store its JSON result as step
        `name`: when the job runs again, the stored result is returned and `fn` is not called.
        A step that raised stores nothing, so it runs again on the next attempt."""
        return await self._durable("step").step(name, fn, *args, **kwargs)

    async def sleep(self, duration: float | timedelta) -> None:
        """Suspend the job for `duration` (seconds or a timedelta), freeing its slot; it stays
        `queued` meanwhile, and runs again from the top when the time comes."""
        await self._durable("sleep").sleep(duration)

    async def sleep_until(self, when: datetime) -> None:
        """Suspend the job until `when`, a timezone-aware datetime (see `sleep`)."""
        await self._durable("sleep_until").sleep_until(when)

    async def wait_for_event(self, key: str, timeout: float | timedelta | None = None) -> JsonValue:
        """The payload of the first event emitted with `key`, emitted before or after this
        call; the job is suspended until then. EventTimeout once `timeout` has passed."""
        return await self._durable("wait_for_event").wait_for_event(key, timeout)

    async def spawn(self, jobs: Sequence[JobCreate]) -> list[str]:
        """Create child jobs in this job's pipeline, once: a rerun returns the same ids."""
        return await self._durable("spawn").spawn(jobs)

    async def wait_for_jobs(self, ids: Sequence[str], timeout: float | timedelta | None = None) -> list[JobRecord]:
        """The records of these jobs, in order, once every one is completed, failed or
        cancelled; the job is suspended until then. JobWaitTimeout once `timeout` has passed."""
        return await self._durable("wait_for_jobs").wait_for_jobs(ids, timeout)

    async def emit_event(self, key: str, payload: JsonValue = None) -> bool:
        """Emit an event (see `JobClient.emit_event`); True if it was the first of its key."""
        return await self._durable("emit_event").emit_event(key, payload)


@dataclass
class JobRecord:
    """A full row of `jobs`, as the CLI, the API and the console read it."""

    id: str
    type: str
    status: Status
    user_id: int | None
    pipeline_id: str | None
    input_data: dict[str, Any]
    result_data: Any
    error_message: str | None
    dependent_on_jobs: list[str]
    retry_count: int
    next_retry_at: datetime | None
    is_active: bool
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None
    priority: int
    pending_deps: int
    attempts: int
    worker_id: str | None
    started_at: datetime | None
    scheduled_at: datetime | None = None
    unique_key: str | None = None
    spawned_by: str | None = None  # the job whose `job.spawn` created this one

    COLUMNS = ("id, type, status, user_id, pipeline_id, input_data, result_data, error_message, "
               "dependent_on_jobs, retry_count, next_retry_at, is_active, created_at, updated_at, "
               "completed_at, priority, pending_deps, attempts, worker_id, started_at, scheduled_at, unique_key, "
               "spawned_by")

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> JobRecord:
        values = dict(row)
        values["status"] = Status(values["status"])
        values["dependent_on_jobs"] = values["dependent_on_jobs"] or []
        return cls(**values)

    def result(self, model: builtins.type[OutputT]) -> OutputT:  # `type` is a field here
        """`result_data` parsed into `model`, a pydantic model (typically the processor's
        `output_model`): pydantic's ValidationError when it does not fit. NoJobResult when the job
        has no result, being neither completed nor held for approval."""
        if self.status not in RESULT_STATUSES:
            reason = f" ({self.error_message})" if self.error_message else ""
            raise NoJobResult(f"job {self.id} is {self.status}{reason}: it has no result")
        return model.model_validate(self.result_data)

    def to_json(self) -> JsonObject:
        out: JsonObject = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else (
                str(value) if isinstance(value, Status) else value)
        return out
