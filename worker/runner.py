"""The worker: claims jobs, runs them through their processors on asyncio, records results.

One claim loop takes as many runnable jobs as there are free slots in one statement. A flush
loop writes finished jobs in batches: whatever finished while the previous batch was being
written goes out in the next one, so completions cost one round trip per batch, not per job.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from worker import transitions
from worker.db import CONNECTION_ERRORS, connect, create_pool
from worker.errors import InvalidJob, PermanentJobError
from worker.models import Job, JobCreate, ProcessorResult
from worker.processor import BaseProcessor
from worker.settings import Settings

log = logging.getLogger("jobdesk.worker")

NEW_JOBS_CHANNEL = "jobdesk_new_jobs"
CANCEL_GRACE_S = 0.5  # a cancelled processor may stop cleanly this long before its task is cancelled
MAX_BACKOFF_S = 5.0


class InvalidResult(Exception):
    """A processor returned something the engine cannot store."""


def _check_result(job: Job, result: Any) -> ProcessorResult:
    if not isinstance(result, ProcessorResult):
        raise InvalidResult(f"processor for {job.type!r} returned {type(result).__name__}, "
                            f"not ProcessorResult")
    if not isinstance(result.result_data, dict):
        raise InvalidResult("result_data must be a dict")
    try:
        json.dumps(result.result_data)
    except (TypeError, ValueError) as exc:
        raise InvalidResult(f"result_data is not JSON: {exc}") from None
    for child in result.next_jobs:
        if not isinstance(child, JobCreate):
            raise InvalidResult("next_jobs must hold JobCreate objects")
        try:
            json.dumps(child.input_data)
        except (TypeError, ValueError) as exc:
            raise InvalidResult(f"input_data of next job {child.type!r} is not JSON: {exc}") from None
    return result


class Worker:
    """One worker process's engine. `run()` returns after a stop request, once drained."""

    def __init__(self, settings: Settings, dsn: str, processors: dict[str, BaseProcessor],
                 *, worker_id: str | None = None) -> None:
        self.settings = settings
        self.dsn = dsn
        self.processors = processors
        self.types = sorted(processors)
        self.concurrency = settings.MAX_CONCURRENT_JOBS
        self.worker_id = worker_id or f"{socket.gethostname()[:40]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.pool: asyncpg.Pool | None = None
        self._listener: asyncpg.Connection | None = None
        self._running: dict[str, tuple[Job, asyncio.Task[None]]] = {}
        self._done: list[tuple[Job, ProcessorResult]] = []
        self._done_event = asyncio.Event()
        self._wake = asyncio.Event()
        self._slot_free = asyncio.Event()
        self._stop = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._db_down = False
        self.stats = {"completed": 0, "failed_attempts": 0, "claimed": 0}

    # -- lifecycle --------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop claiming; running jobs finish (up to JOB_SHUTDOWN_TIMEOUT), then `run()` returns."""
        if not self._stopping:
            log.info("stopping: no new claims; waiting for %d running job(s)", len(self._running))
        self._stopping = True
        self._stop.set()
        self._wake.set()
        self._slot_free.set()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)

    async def run(self) -> None:
        size = max(2, min(self.settings.DB_POOL_SIZE, self.concurrency + 4))
        self.pool = await create_pool(self.dsn, size=size)
        try:
            await self._listen()
            log.info("worker %s ready: %d slot(s), types %s", self.worker_id, self.concurrency,
                     ", ".join(self.types) or "(none)")
            self._tasks = [asyncio.create_task(self._claim_loop(), name="jobdesk-claim"),
                           asyncio.create_task(self._flush_loop(), name="jobdesk-flush"),
                           asyncio.create_task(self._listener_watch(), name="jobdesk-listener")]
            for task in self._tasks:
                task.add_done_callback(self._task_died)
            await self._stop.wait()
            await self._drain()
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._listener is not None and not self._listener.is_closed():
                await self._listener.close()
            await self.pool.close()
        log.info("worker %s stopped: %d completed, %d failed attempt(s)", self.worker_id,
                 self.stats["completed"], self.stats["failed_attempts"])

    def _task_died(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self._stopping:
            return
        exc = task.exception()
        if exc is not None:
            log.error("internal task %s crashed: %r; stopping", task.get_name(), exc, exc_info=exc)
            self.request_stop()

    async def _drain(self) -> None:
        running = [t for _, t in self._running.values()]
        if running:
            _, pending = await asyncio.wait(running, timeout=self.settings.JOB_SHUTDOWN_TIMEOUT)
            if pending:
                log.warning("%d job(s) still running after %.0f s; putting them back",
                            len(pending), self.settings.JOB_SHUTDOWN_TIMEOUT)
                ids = [job.id for job, t in self._running.values() if t in pending]
                for t in pending:
                    t.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                await self._db_call(lambda c: transitions.put_back(c, self.worker_id, ids, "worker stopped"))
        await self._flush_all()

    # -- database plumbing -----------------------------------------------------------------

    async def _listen(self) -> None:
        self._listener = await connect(self.dsn)
        await self._listener.add_listener(NEW_JOBS_CHANNEL, self._on_new_jobs)
        await self._listener.add_listener(transitions.CONTROL_CHANNEL, self._on_control)

    async def _listener_watch(self) -> None:
        """Reconnect the LISTEN connection when it drops; poll meanwhile."""
        delay = 0.2
        while True:
            await asyncio.sleep(1.0)
            if self._listener is not None and not self._listener.is_closed():
                try:
                    await self._listener.execute("SELECT 1")
                    delay = 0.2
                    continue
                except CONNECTION_ERRORS:
                    pass
            try:
                await self._listen()
                log.info("listening for new jobs again")
                self._wake.set()
            except Exception:
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    def _on_new_jobs(self, *_: object) -> None:
        self._wake.set()

    def _on_control(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        job_id = message.get("cancel") if isinstance(message, dict) else None
        if job_id in self._running:
            self._cancel_running(job_id)

    def _cancel_running(self, job_id: str) -> None:
        job, task = self._running[job_id]
        if job.cancel_event is not None:
            job.cancel_event.set()
        log.info("job %s cancelled by an operator", job_id)
        asyncio.get_running_loop().call_later(CANCEL_GRACE_S, lambda: task.done() or task.cancel())

    async def _db_call(self, fn: Any) -> Any:
        """Run fn(conn), retrying with backoff while the database is unreachable."""
        assert self.pool is not None
        delay = 0.1
        while True:
            try:
                async with self.pool.acquire() as conn:
                    result = await fn(conn)
                if self._db_down:
                    self._db_down = False
                    log.warning("database is back")
                return result
            except CONNECTION_ERRORS as exc:
                if not self._db_down:
                    self._db_down = True
                    log.warning("database unreachable (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    # -- claiming ---------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        poll = self.settings.JOB_PROCESSOR_POLL_INTERVAL
        while not self._stopping:
            free = self.concurrency - len(self._running)
            if free <= 0:
                self._slot_free.clear()
                await self._slot_free.wait()
                # Let other jobs that finish in this same tick free their slots too.
                await asyncio.sleep(0)
                continue
            self._wake.clear()
            jobs = await self._db_call(
                lambda c: transitions.claim(c, self.worker_id, self.types, free))
            if self._stopping:
                await self._db_call(lambda c: transitions.put_back(
                    c, self.worker_id, [j.id for j in jobs], "worker stopped"))
                break
            for job in jobs:
                self._start(job)
            if len(jobs) < free:
                try:
                    await asyncio.wait_for(self._wake.wait(), poll)
                except TimeoutError:
                    pass

    def _start(self, job: Job) -> None:
        job.cancel_event = asyncio.Event()
        self.stats["claimed"] += 1
        task = asyncio.create_task(self._run_job(job), name=f"job-{job.id}")
        self._running[job.id] = (job, task)

    async def _run_job(self, job: Job) -> None:
        try:
            await self._run_job_inner(job)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug of ours, not of the processor: the job stays in_progress under this worker
            # until the lease rescue takes it back, so it is not lost.
            log.exception("job %s: internal error while recording its outcome", job.id)

    async def _run_job_inner(self, job: Job) -> None:
        try:
            processor = self.processors[job.type]
            try:
                result = _check_result(job, await processor.process(job))
            except asyncio.CancelledError:
                if job.cancelled:
                    await self._db_call(lambda c: transitions.mark_cancelled(c, self.worker_id, job))
                    return
                raise
            except PermanentJobError as exc:
                await self._record_failure(job, exc, permanent=True)
                return
            except Exception as exc:
                await self._record_failure(job, exc, permanent=False)
                return
            if job.cancelled:
                await self._db_call(lambda c: transitions.mark_cancelled(c, self.worker_id, job))
                return
            self._done.append((job, result))
            self._done_event.set()
        finally:
            self._running.pop(job.id, None)
            self._slot_free.set()

    async def _record_failure(self, job: Job, exc: BaseException, *, permanent: bool) -> None:
        error, trace = transitions.format_exception(exc)
        self.stats["failed_attempts"] += 1
        outcome = await self._db_call(lambda c: transitions.fail_attempt(
            c, self.worker_id, job, error, trace, intervals=self.settings.JOB_RETRY_INTERVALS,
            permanent=permanent))
        if not outcome.written:
            log.warning("job %s: lost ownership before its failure was recorded", job.id)
        elif outcome.status == "failed":
            log.error("job %s (%s) failed for good after %d retries: %s", job.id, job.type,
                      outcome.retry_count, error)
        else:
            log.info("job %s (%s) failed (%s); retry %d in %.1f s", job.id, job.type, error,
                     outcome.retry_count, outcome.delay or 0)

    # -- completing -------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await self._done_event.wait()
            await self._flush_all()

    async def _flush_all(self) -> None:
        while self._done:
            batch, self._done = self._done, []
            self._done_event.clear()
            await self._write(batch)

    async def _write(self, batch: Sequence[tuple[Job, ProcessorResult]]) -> None:
        try:
            written = await self._db_call(lambda c: transitions.complete_batch(c, self.worker_id, batch))
        except InvalidJob:
            # One result's next_jobs were refused; write the others and fail that one.
            written = set()
            for job, result in batch:
                try:
                    written |= await self._db_call(
                        lambda c, j=job, r=result: transitions.complete_batch(c, self.worker_id, [(j, r)]))
                except InvalidJob as exc:
                    await self._record_failure(job, exc, permanent=True)
                    written.add(job.id)
        self.stats["completed"] += len(written)
        if len(written) < len(batch):
            for job, _ in batch:
                if job.id not in written:
                    await self._not_written(job)

    async def _not_written(self, job: Job) -> None:
        """A finished job whose completion did not apply: cancelled meanwhile, or no longer ours."""
        if await self._db_call(lambda c: transitions.mark_cancelled(c, self.worker_id, job)):
            log.info("job %s finished after it was cancelled; recorded as cancelled", job.id)
        else:
            log.warning("job %s finished, but this worker no longer owns it; result dropped", job.id)
