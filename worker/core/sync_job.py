"""The job as a SyncProcessor sees it: a Job's data and methods, as plain calls.

This module imports nothing at run time beyond the standard library (and jobdesk.core.job_report,
which imports no more), so that the process a
processor runs in (executor "process") loads it at no cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from jobdesk.core.job_report import DONE, Reported

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime, timedelta

    from jobdesk.core.json_value import JsonValue
    from jobdesk.core.models import JobCreate, JobRecord


class SyncJob:
    """A claimed job, as a SyncProcessor's plain `def process` gets it in its thread or process.

    It has the data of a Job (`id`, `type`, `input_data`, `user_id`, `pipeline_id`,
    `retry_count`, `attempt`, `priority`) and `cancelled`, and the same methods without `await`:
    each is carried out on the job in the worker, and returns its result (or raises its error)
    here. In a separate process (executor "process"), the suspending calls (`sleep`,
    `sleep_until`, `wait_for_event`, `wait_for_jobs`) raise RuntimeError: a process cannot be
    suspended and resumed; use a thread for them.
    """

    __slots__ = ()

    id: str
    type: str
    input_data: dict[str, Any]
    user_id: int | None
    pipeline_id: str | None
    retry_count: int
    attempt: int
    priority: int

    @property
    def cancelled(self) -> bool:
        """True once an operator has cancelled this job: stop early, and return or raise."""
        raise NotImplementedError

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Record how far the job has got: `fraction` from 0 to 1 and an optional message
        (Job.progress)."""
        self._call("progress", fraction, message)

    def log(self, message: str, level: str = "INFO") -> None:
        """Keep a log line with this job's attempt (Job.log)."""
        self._call("log", message, level)

    def step(self, name: str, fn: Callable[..., object], *args: object, **kwargs: object) -> JsonValue:
        """Run `fn(*args, **kwargs)` once and store its JSON result as step `name`; a rerun
        returns the stored result without calling `fn` (Job.step)."""
        return cast("JsonValue", self._call("step", name, fn, *args, **kwargs))

    def sleep(self, duration: float | timedelta) -> None:
        """Suspend the job for `duration`, freeing its slot; it runs again from the top when the
        time comes (Job.sleep)."""
        self._call("sleep", duration)

    def sleep_until(self, when: datetime) -> None:
        """Suspend the job until `when`, a timezone-aware datetime (Job.sleep_until)."""
        self._call("sleep_until", when)

    def wait_for_event(self, key: str, timeout: float | timedelta | None = None) -> JsonValue:
        """The payload of the first event emitted with `key`; the job is suspended until then
        (Job.wait_for_event)."""
        return cast("JsonValue", self._call("wait_for_event", key, timeout))

    def spawn(self, jobs: Sequence[JobCreate]) -> list[str]:
        """Create child jobs in this job's pipeline, once: a rerun returns the same ids (Job.spawn)."""
        return cast("list[str]", self._call("spawn", jobs))

    def wait_for_jobs(self, ids: Sequence[str], timeout: float | timedelta | None = None) -> list[JobRecord]:
        """The records of these jobs once every one has ended; the job is suspended until then
        (Job.wait_for_jobs)."""
        return cast("list[JobRecord]", self._call("wait_for_jobs", ids, timeout))

    def emit_event(self, key: str, payload: JsonValue = None) -> bool:
        """Emit an event; True if it was the first of its key (Job.emit_event)."""
        return bool(self._call("emit_event", key, payload))

    def _call(self, name: str, *args: object, **kwargs: object) -> Any:  # noqa: ANN401 - what the Job's method gives
        """Call the job's method `name` in the worker and return its result (each kind of
        SyncJob carries the call its own way)."""
        raise NotImplementedError


class AwaitableReports:
    """A SyncJob as a BaseProcessor's `process` gets it in a thread or a process (a plain `def`
    written before SyncProcessor, or an `async def` sent there by its `executor`): the same,
    except that `progress` and `log` return an awaitable that is already done, as a Job's do,
    so that `await job.progress(...)` works there as it always has."""

    __slots__ = ("_job",)

    def __init__(self, job: SyncJob) -> None:
        object.__setattr__(self, "_job", job)

    def progress(self, fraction: float, message: str | None = None) -> Reported:
        self._job.progress(fraction, message)
        return DONE

    def log(self, message: str, level: str = "INFO") -> Reported:
        self._job.log(message, level)
        return DONE

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - whatever the SyncJob has
        return getattr(self._job, name)

    def __setattr__(self, name: str, value: object) -> None:
        setattr(self._job, name, value)

    def __repr__(self) -> str:
        return repr(self._job)
