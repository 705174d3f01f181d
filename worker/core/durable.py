"""Durable processors: the rules of `job.step`, `job.sleep`, `job.wait_for_event`, `job.spawn`
and `job.wait_for_jobs`, apart from the database that keeps what they store.

A job that runs again (after a failure, a crash or a suspension) runs `process` from the top.
Each step whose result is stored returns it without calling its function again. Sleeps and
waits are stored as checkpoints too (names starting with "@", which processors cannot use), so
that a rerun finds the same wake time, deadline or child jobs, and knows the wait is over. A
sleep or a wait that is not over raises `Suspension`, which unwinds `process`: the worker then
puts the job back in the queue until its time, and frees its slot.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal, Protocol

from jobdesk.core import tracing
from jobdesk.core.errors import EventTimeout, InvalidJob, JobWaitTimeout, StepError
from jobdesk.core.json_value import JsonValue
from jobdesk.core.validation import json_text

if TYPE_CHECKING:
    from jobdesk.core.models import Job, JobCreate, JobRecord

WaitKind = Literal["sleep", "event", "jobs"]
CHECKPOINT = "@"  # the first character of the engine's own step names
_TERMINAL = frozenset({"completed", "failed", "cancelled"})
_EARLY_S = 0.005  # a wake this close to its time counts as on time (clocks of two hosts)
# The end of a job this one spawned wakes it; the end of any other job does not, so a wait for
# jobs it did not spawn looks again this often.
RECHECK_OTHERS_S = 1.0


@dataclass(frozen=True)
class Wait:
    """What a suspended job waits for, and the checkpoint stored with its suspension."""

    kind: WaitKind
    until: datetime | None  # None: no timeout
    step_name: str
    step_result: JsonValue
    step_started: datetime
    event_key: str | None = None
    child_ids: tuple[str, ...] = ()


class Suspension(BaseException):
    """Unwinds a processor's `process` so the worker can suspend its job. It derives from
    BaseException, as asyncio's CancelledError does, so `except Exception` lets it through:
    a processor must not catch it."""

    def __init__(self, wait: Wait) -> None:
        super().__init__(f"suspended: {wait.kind}")
        self.wait = wait


class StepStore(Protocol):
    """Where a running job's steps and checkpoints are kept (the worker's database)."""

    async def load(self, job: Job) -> dict[str, JsonValue]: ...

    async def save(self, job: Job, name: str, result_json: str, started: datetime) -> None: ...

    async def take_event(self, job: Job, name: str, key: str, started: datetime) -> tuple[bool, JsonValue]:
        """The first payload emitted for `key`, also stored as step `name`: (found, payload)."""
        ...

    async def records(self, ids: Sequence[str]) -> list[JobRecord]: ...

    async def spawn(self, job: Job, children: Sequence[JobCreate], name: str, started: datetime) -> list[str]: ...

    async def emit(self, key: str, payload: JsonValue) -> bool: ...


def _now() -> datetime:
    return datetime.now(UTC)


def _seconds(value: float | timedelta, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        raise StepError(f"{what} must be a number of seconds or a timedelta, not {type(value).__name__}")
    return float(seconds)


def _aware(when: datetime, what: str) -> datetime:
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise StepError(f"{what} needs a timezone-aware datetime, such as datetime.now(UTC)")
    return when


def _deadline(timeout: float | timedelta | None) -> datetime | None:
    return None if timeout is None else _now() + timedelta(seconds=_seconds(timeout, "timeout"))


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


def _parse(text: JsonValue) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) else None


def _over(when: datetime | None) -> bool:
    return when is not None and _now() >= when - timedelta(seconds=_EARLY_S)


@dataclass
class DurableRun:
    """The durable calls of one run of one job: its stored steps (loaded on first use), the
    names used in this run, and the counters that name its sleeps and waits."""

    job: Job
    store: StepStore
    on_wake: Callable[[], None] = lambda: None
    # Runs a step's plain function off the event loop (the worker's threads); None: asyncio's default.
    run_sync: Callable[[Callable[[], object]], Awaitable[object]] | None = None
    _stored: dict[str, JsonValue] | None = None
    _used: set[str] = field(default_factory=set)
    _counts: dict[str, int] = field(default_factory=dict)

    async def _lookup(self, name: str) -> tuple[bool, JsonValue]:
        if self._stored is None:  # a first attempt has nothing stored: no round trip
            self._stored = await self.store.load(self.job) if self.job.attempt > 1 else {}
        return (name in self._stored, self._stored.get(name))

    def _checkpoint(self, kind: str) -> str:
        self._counts[kind] = n = self._counts.get(kind, 0) + 1
        return f"{CHECKPOINT}{kind} {n}"

    async def step(self, name: str, fn: Callable[..., object], *args: object, **kwargs: object) -> JsonValue:
        if not isinstance(name, str) or not name or name.startswith(CHECKPOINT):
            raise StepError(f"step name {name!r} is not allowed: use a non-empty name that does not "
                            f"start with {CHECKPOINT!r}")
        if name in self._used:
            raise StepError(f"step {name!r} is used twice in one run of job {self.job.id}; "
                            f"give each step its own name")
        self._used.add(name)
        found, value = await self._lookup(name)
        with tracing.step_span(self.job, name, replayed=found):
            if found:
                return value
            return await self._run_step(name, fn, *args, **kwargs)

    async def _run_step(self, name: str, fn: Callable[..., object], *args: object, **kwargs: object) -> JsonValue:
        started = _now()
        result: object
        if inspect.iscoroutinefunction(fn):
            result = fn(*args, **kwargs)
        else:  # a plain function may block: it runs in a thread, and the loop goes on
            call = functools.partial(fn, *args, **kwargs)
            result = await (self.run_sync(call) if self.run_sync is not None else asyncio.to_thread(call))  # type: ignore[arg-type]
        if inspect.isawaitable(result):
            result = await result
        try:
            text = json_text(result, f"the result of step {name!r}")
        except InvalidJob as exc:
            raise StepError(str(exc)) from None
        await self.store.save(self.job, name, text, started)
        stored: JsonValue = json.loads(text)  # what a rerun gets back, so both runs see the same
        if self._stored is not None:
            self._stored[name] = stored
        return stored

    async def sleep_until(self, when: datetime) -> None:
        name = self._checkpoint("sleep")
        found, value = await self._lookup(name)
        if found:
            until = _parse(value.get("until") if isinstance(value, dict) else None)
            if until is None or _over(until):
                self.on_wake()
                return
        else:
            until = _aware(when, "job.sleep_until")
            if _over(until):
                return
        raise Suspension(Wait("sleep", until, name, {"until": _iso(until)}, _now()))

    async def sleep(self, duration: float | timedelta) -> None:
        await self.sleep_until(_now() + timedelta(seconds=_seconds(duration, "job.sleep")))

    async def wait_for_event(self, key: str, timeout: float | timedelta | None = None) -> JsonValue:
        if not isinstance(key, str) or not key:
            raise StepError("wait_for_event needs a non-empty string key")
        name = self._checkpoint("event")
        found, value = await self._lookup(name)
        if found and isinstance(value, dict):
            if "payload" in value:
                self.on_wake()
                return value["payload"]
            if value.get("timed_out"):
                raise EventTimeout(f"no event {key!r} before the timeout", key)
            deadline = _parse(value.get("deadline"))
        else:
            deadline = _deadline(timeout)
        started = _now()
        emitted, payload = await self.store.take_event(self.job, name, key, started)
        if emitted:
            if found:
                self.on_wake()
            return payload
        if _over(deadline):
            await self.store.save(self.job, name, json.dumps({"key": key, "deadline": _iso(deadline),
                                                              "timed_out": True}), started)
            raise EventTimeout(f"no event {key!r} before the timeout", key)
        raise Suspension(Wait("event", deadline, name, {"key": key, "deadline": _iso(deadline)}, started,
                              event_key=key))

    async def spawn(self, children: Sequence[JobCreate]) -> list[str]:
        name = self._checkpoint("spawn")
        found, value = await self._lookup(name)
        if found and isinstance(value, dict) and isinstance(value.get("ids"), list):
            return [str(i) for i in value["ids"]]
        children = list(children)
        tracing.carry(children)  # the children's runs continue this run's trace
        return await self.store.spawn(self.job, children, name, _now())

    async def wait_for_jobs(self, ids: Sequence[str],
                            timeout: float | timedelta | None = None) -> list[JobRecord]:
        wanted = [str(i) for i in ids]
        name = self._checkpoint("wait-jobs")
        found, value = await self._lookup(name)
        if found and isinstance(value, dict):
            if value.get("timed_out"):
                raise JobWaitTimeout(f"child jobs not done before the timeout: {', '.join(wanted)}", {})
            deadline = _parse(value.get("deadline"))
        else:
            deadline = _deadline(timeout)
        started = _now()
        records = await self.store.records(wanted)
        pending = {r.id: str(r.status) for r in records if str(r.status) not in _TERMINAL}
        if not pending:
            if found:
                self.on_wake()
            return records
        if _over(deadline):
            await self.store.save(self.job, name, json.dumps({"ids": wanted, "deadline": _iso(deadline),
                                                              "timed_out": True}), started)
            raise JobWaitTimeout(f"{len(pending)} of {len(wanted)} child jobs not done before the timeout",
                                 pending)
        wake = deadline
        if any(r.spawned_by != self.job.id for r in records if r.id in pending):
            soon = _now() + timedelta(seconds=RECHECK_OTHERS_S)
            wake = soon if deadline is None else min(deadline, soon)
        raise Suspension(Wait("jobs", wake, name, {"ids": wanted, "deadline": _iso(deadline)}, started,
                              child_ids=tuple(wanted)))

    async def emit_event(self, key: str, payload: JsonValue = None) -> bool:
        return await self.store.emit(key, payload)

