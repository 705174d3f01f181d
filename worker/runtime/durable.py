"""The worker's side of durable processors: the step store a running job's `DurableRun` writes
through (the worker's pool, retried while the database is away), and the timers that wake the
pump when a job this worker suspended is due again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from jobdesk.core.durable import DurableRun
from jobdesk.core.json_value import JsonValue
from jobdesk.core.models import Job, JobCreate, JobRecord
from jobdesk.runtime.dblink import DbLink
from jobdesk.runtime.threads import JobThreads
from jobdesk.store import durable

if TYPE_CHECKING:
    from jobdesk.observe.metrics import WorkerMetrics

MAX_LOCAL_WAKE_S = 3600.0  # a sleep longer than this is left to the claim's poll


class WorkerSteps:
    """A `StepStore` on the worker's database link: every write fenced by this worker's id.

    Jobs that run again after a suspension start together (the claim takes them in batches), and
    each first reads its stored steps: the reads asked for in the same turn of the event loop go
    out as one statement."""

    def __init__(self, db: DbLink, worker_id: str) -> None:
        self.db = db
        self.worker_id = worker_id
        self._loads: dict[str, asyncio.Future[dict[str, JsonValue]]] = {}
        self._loading: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # the loads under way, held until they end

    async def load(self, job: Job) -> dict[str, JsonValue]:
        wanted = self._loads.get(job.id)
        if wanted is None:
            wanted = self._loads[job.id] = asyncio.get_running_loop().create_future()
        if self._loading is None:
            self._loading = asyncio.create_task(self._load_together(), name="jobdesk-step-loads")
            self._tasks.add(self._loading)
            self._loading.add_done_callback(self._tasks.discard)
        return await asyncio.shield(wanted)

    async def _load_together(self) -> None:
        await asyncio.sleep(0)  # the other jobs starting in this turn ask too
        wanted, self._loads, self._loading = self._loads, {}, None
        try:
            steps = await self.db.call(lambda c: durable.load_steps(c, list(wanted)))
        except BaseException as exc:
            for future in wanted.values():
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for job_id, future in wanted.items():
            if not future.done():
                future.set_result(steps.get(job_id, {}))

    async def save(self, job: Job, name: str, result_json: str, started: datetime) -> None:
        await self.db.call(lambda c: durable.save_step(c, self.worker_id, job, name, result_json, started))

    async def take_event(self, job: Job, name: str, key: str, started: datetime) -> tuple[bool, JsonValue]:
        return await self.db.call(lambda c: durable.take_event(c, job, name, key, started))

    async def records(self, ids: Sequence[str]) -> list[JobRecord]:
        return await self.db.call(lambda c: durable.records(c, ids))

    async def spawn(self, job: Job, children: Sequence[JobCreate], name: str, started: datetime) -> list[str]:
        return await self.db.call(lambda c: durable.spawn(c, self.worker_id, job, children, name, started))

    async def emit(self, key: str, payload: JsonValue) -> bool:
        """A payload that is not JSON fails in the processor, with json's TypeError."""
        return await self.db.call(lambda c: durable.emit_event(c, key, payload))


class Durability:
    """Gives each job the worker starts its `DurableRun`, and wakes the pump when a job it
    suspended for a short sleep is due (other workers' and long sleeps are found by the poll)."""

    def __init__(self, db: DbLink, worker_id: str, metrics: WorkerMetrics | None, wake: Callable[[], None],
                 threads: JobThreads | None = None) -> None:
        """`threads` run the plain functions given to `job.step`."""
        self.store = WorkerSteps(db, worker_id)
        self.threads = threads
        self.metrics = metrics
        self.wake = wake
        self._timers: dict[asyncio.Handle, float] = {}  # each local wake-up and when it is due (loop time)

    def run_for(self, job: Job) -> DurableRun:
        """The durable calls of a job's run, made on its first one: a job that makes none costs nothing."""
        run_sync = self.threads.run if self.threads is not None else None
        return DurableRun(job, self.store, on_wake=lambda: self._woken(job), run_sync=run_sync)

    def _woken(self, job: Job) -> None:
        if self.metrics is not None:
            self.metrics.of(job.type).woken += 1

    def wake_at(self, when: datetime | None) -> None:
        """Kick the pump when `when` comes, if that is soon."""
        if when is None:
            return
        delay = (when - datetime.now(UTC)).total_seconds()
        if delay > MAX_LOCAL_WAKE_S:
            return
        loop = asyncio.get_running_loop()
        due = max(0.0, delay) + 0.002
        # The deadline is kept beside the handle: a loop's call_later need not return a TimerHandle
        # (qasync's, in the console, returns a plain Handle, which has no when()).
        self._timers[loop.call_later(due, self._fire)] = loop.time() + due

    def _fire(self) -> None:
        now = asyncio.get_running_loop().time()
        self._timers = {t: at for t, at in self._timers.items() if not t.cancelled() and at > now}
        self.wake()

    def close(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
