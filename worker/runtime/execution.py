"""Running one job: its input checked against the processor's model, the processor called in a
task of its own (on the loop, in a thread, or in a process: its `executor`), within its time
limit, its result checked, and an operator's cancellation of the running task."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from jobdesk.core import tracing
from jobdesk.core.durable import Suspension
from jobdesk.core.errors import JobTimedOut, PermanentJobError
from jobdesk.core.input_validation import check_job_input
from jobdesk.core.job_stack import StackFrame
from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import (
    AnyProcessor,
    BaseProcessor,
    Executor,
    SyncProcessor,
    executor_of,
    seconds_text,
    timeout_text,
)
from jobdesk.core.sync_job import AwaitableReports
from jobdesk.runtime.job_reports import current_job
from jobdesk.runtime.parts import RunAids, Shared, TimeLimits
from jobdesk.runtime.results import check_output, check_result
from jobdesk.runtime.stacks import Place, job_stack
from jobdesk.runtime.threads import JobThreads, ThreadJob

if TYPE_CHECKING:
    from jobdesk.runtime.process_pool import ProcessPool, Recycling

log = logging.getLogger("jobdesk.worker")

CANCEL_GRACE_S = 0.5  # a cancelled processor may stop cleanly this long before its task is cancelled
PREFETCH_BELOW_S = 0.05  # claim ahead only while jobs average less than this
# Jobs held per slot while jobs are short, at most: the slot's own and those claimed ahead. Each
# round trip costs PostgreSQL about 0.35 ms whatever it carries, and the worker's Python a share of
# it too, so a round should carry many. With 3 per slot and two claim pumps a round of no-op jobs
# carried 13 jobs each way; with 6 and one pump, 35 (20,000 no-op jobs, 10 slots: 574 round trips
# instead of 1,539, and 99-112 instead of 159-203 us of CPU per job, worker and PostgreSQL
# together); with 12 and two pumps (pump.PUMPS), about 20 per pump, whose rounds overlap.
PREFETCH_PER_SLOT = 12
# While a limited or flow-controlled type is claimed: jobs held at a worker are out of the reach of
# the fleet's limits and turns (a user's job enqueued now waits behind those), so fewer.
PREFETCH_PER_SLOT_LIMITED = 6
# The work claimed ahead is at most this many seconds of the slots' time, at the jobs' average run
# time: jobs of a few ms are held 12 per slot, jobs of 30 ms 11 per slot, jobs of 49 ms 7.
QUEUED_WORK_S = 0.3


def time_limit(job_type: str, processor: AnyProcessor, type_timeouts: Mapping[str, float],
               default: float | None) -> float | None:
    """A type's time limit in seconds: JOB_TYPE_TIMEOUTS, else the processor's `timeout`, else
    JOB_TIMEOUT; None for no limit."""
    if job_type in type_timeouts:
        return type_timeouts[job_type]
    return processor.timeout if processor.timeout is not None else default


def _in_thread(processor: AnyProcessor, job: Job, loop: asyncio.AbstractEventLoop, place: Place) -> object:
    """A processor's `process`, in a thread: a SyncProcessor's with a SyncJob; a BaseProcessor's
    (a plain def, or an async def told to run in a thread, which runs to its end on a loop of the
    thread's own) with the same job, whose `progress` and `log` may be awaited as a Job's. `place`
    says which thread, for its stack."""
    place.thread = threading.get_ident()
    try:
        if isinstance(processor, SyncProcessor):
            return processor.process(ThreadJob(job, loop))
        result: object = processor.process(cast(Job, AwaitableReports(ThreadJob(job, loop))))  # its names, not its type
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
        return result
    finally:
        place.thread = None


class Execution:
    """The jobs a worker runs (`running`, at most `concurrency`) and those claimed that wait for
    a slot (`ready`). A job that ends hands its outcome to `outcomes` and wakes a pump."""

    def __init__(self, processors: Mapping[str, AnyProcessor], concurrency: int, shared: Shared,
                 aids: RunAids | None = None, limits: TimeLimits | None = None) -> None:
        """From `shared`: once `stop` is set no job starts. `aids` give each run its durable calls,
        its progress and log lines and, for plain `def` processors, threads; `limits` limit each run,
        with the processors' own `timeout`."""
        aids = aids or RunAids()
        limits = limits or TimeLimits()
        self.durability = aids.durability
        self.reports = aids.reports
        self._side_writes: set[asyncio.Task[None]] = set()
        self._durable_source = aids.durability.run_for if aids.durability is not None else None
        self.processors = processors
        self.concurrency = concurrency
        self.outcomes = shared.outcomes
        self.kicks = shared.kicks
        self.stop = shared.stop
        self.metrics = shared.metrics
        self.running: dict[str, tuple[Job, asyncio.Task[None]]] = {}
        self.places: dict[str, Place] = {}  # where each running job's code is, besides its task
        self.ready: deque[Job] = deque()  # claimed, waiting for a free slot
        self.avg_run_s: float | None = None
        self.threads = aids.threads or JobThreads(concurrency)
        # Per type: where `process` runs and its time limit. None is the fast path (an async
        # processor without a limit): awaited in the job's task as it is, nothing in between.
        self.plans: dict[str, tuple[Executor, float | None] | None] = {}
        for job_type, processor in processors.items():
            executor = executor_of(processor)
            limit = time_limit(job_type, processor, limits.per_type, limits.default)
            self.plans[job_type] = None if executor == "async" and limit is None else (executor, limit)
        in_processes = {type(processors[t]).__module__ for t, plan in self.plans.items()
                        if plan is not None and plan[0] == "process"}
        self.pool: ProcessPool | None = None  # the processes that run them, reused from run to run
        if in_processes:
            # Loaded only for a worker that runs processes: multiprocessing and pickle cost its start.
            from jobdesk.runtime.process_pool import Recycling
            from jobdesk.runtime.processes import make_pool, preload

            preload(sorted(in_processes))
            self.pool = make_pool(Recycling(), concurrency)

    def warm(self) -> None:
        """Load what each processor's first job would: its input model, which a built-in names
        to be imported at first use (`ModelLater`: pydantic with it, ~25 ms of the loop). The
        pumps call this the first time they have nothing to claim, so that a worker that starts
        idle does not make its first jobs wait for it. A model that cannot be loaded is left to
        the first job of its type, which reports it as before."""
        for job_type, processor in self.processors.items():
            try:
                getattr(processor, "input_model", None)
            except Exception as exc:  # noqa: BLE001 - any import error; the job's run says it
                log.debug("input model of %s not loaded ahead: %r", job_type, exc)

    def recycle_processes(self, recycling: Recycling) -> None:
        """When a process of executor "process" is replaced (JOB_PROCESS_MAX_TASKS...)."""
        if self.pool is not None:
            self.pool.recycling = recycling

    def close(self) -> None:
        """Let the idle processes go (the worker is stopping)."""
        if self.pool is not None:
            self.pool.close()

    def capacity(self, per_slot: int = PREFETCH_PER_SLOT) -> int:
        """Slots plus a small local queue, used only while jobs are short: at most `per_slot`
        jobs per slot in all.

        Claiming a few jobs ahead saves a round trip per job when jobs take milliseconds; for
        long jobs it would only keep work from other workers, so it is off then.
        """
        average = self.avg_run_s
        if average is None or average >= PREFETCH_BELOW_S:
            return self.concurrency
        most = self.concurrency * (per_slot - 1)
        ahead = most if average <= 0 else min(most, int(self.concurrency * QUEUED_WORK_S / average))
        return self.concurrency + ahead

    def add_claimed(self, jobs: list[Job]) -> None:
        """Queue jobs just claimed. A job this worker already holds (running, queued, finished
        with its result being written or not written) is not run twice: its claim was made
        again, because the first was lost (a claim commits asynchronously, so a failover or a
        crash may undo it) or the lease rescue took the job back meanwhile. The copy held takes
        the new claim's attempt, so that its result is written under the claim that stands."""
        if not jobs:
            return
        held: dict[str, Job] = {job.id: job for job, _ in self.running.values()}
        held.update((job.id, job) for job in self.ready)
        held.update((job.id, job) for job, _ in (*self.outcomes.plain_done, *self.outcomes.done))
        for job in jobs:
            mine = held.get(job.id)
            if mine is not None:
                mine.attempt = job.attempt
            elif not self.outcomes.claimed_again(job):
                self.ready.append(job)
                continue
            log.warning("job %s was claimed again while this worker holds it (its claim was lost in a "
                        "failover, or taken back); it is not run twice", job.id)

    def start_ready(self) -> None:
        while self.ready and len(self.running) < self.concurrency and not self.stop.is_set():
            self._start(self.ready.popleft())

    def take_ready(self) -> list[str]:
        """Empty the queue of claimed jobs not started; return their ids."""
        unstarted, self.ready = [j.id for j in self.ready], deque()
        return unstarted

    def cancel(self, job_id: str) -> None:
        """Ask a running job to stop (its cancel_event), and cancel its task after a grace period."""
        if job_id not in self.running:
            return
        job, task = self.running[job_id]
        if job.cancel_event is not None:
            job.cancel_event.set()
        if self.pool is not None:
            self.pool.cancel(job_id)  # to a process, where job.cancelled turns true
        log.info("job %s cancelled by an operator", job_id)
        asyncio.get_running_loop().call_later(CANCEL_GRACE_S, lambda: task.done() or task.cancel())

    async def stop_running(self) -> list[str]:
        """Cancel the running jobs' tasks and wait for them; return the ids of those jobs."""
        jobs = list(self.running.values())
        for _, task in jobs:
            task.cancel()
        await asyncio.gather(*(t for _, t in jobs), return_exceptions=True)
        return [job.id for job, _ in jobs]

    def _start(self, job: Job) -> None:
        job.cancel_event = asyncio.Event()
        job.durable_source = self._durable_source
        if self.metrics is not None:
            stats = self.metrics.of(job.type)
            stats.started += 1
            stats.wait.observe(job.waited_s)
        task = asyncio.create_task(self._run_job(job), name=f"job-{job.id}")
        self.running[job.id] = (job, task)
        self.places[job.id] = Place()

    async def _run_job(self, job: Job) -> None:
        started = time.monotonic()
        try:
            await self._run_job_inner(job)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug of ours, not of the processor: the job stays in_progress under this worker
            # until the lease rescue takes it back, so it is not lost.
            log.exception("job %s: internal error while recording its outcome", job.id)
        finally:
            took = time.monotonic() - started
            if self.metrics is not None:
                self.metrics.of(job.type).run.observe(took)
            self.avg_run_s = took if self.avg_run_s is None else 0.9 * self.avg_run_s + 0.1 * took
            self.running.pop(job.id, None)
            self.places.pop(job.id, None)
            self.start_ready()
            if self.stop.is_set():
                self.kicks.set()
            else:
                self.kicks.one()

    async def _reported(self, job: Job) -> None:
        """Write what is left of a run's progress and log lines: before its outcome, so that a
        reader who sees the job finished sees its last progress and every line too."""
        if self.reports is not None:
            taken = self.reports.end(job)
            if taken is not None:
                await self.reports.write_last(taken)

    def _reported_later(self, job: Job) -> None:
        """The same for a run the worker stops: written beside the stop, never holding it up."""
        taken = self.reports.end(job) if self.reports is not None else None
        if self.reports is None or taken is None:
            return
        task = asyncio.create_task(self.reports.write_last(taken), name=f"job-report-{job.id}")
        self._side_writes.add(task)
        task.add_done_callback(self._side_writes.discard)

    async def _call(self, processor: AnyProcessor, job: Job) -> ProcessorResult:
        """The processor's run, its input and result checked; its log records go to the job's report."""
        began = time.monotonic()
        token = current_job.set(job)
        try:
            check_job_input(processor, job)  # a mismatch is permanent: no retry can fix the input
            plan = self.plans.get(job.type)
            returned = await (cast(BaseProcessor, processor).process(job) if plan is None  # plan None: async
                              else self._run_planned(job, processor, *plan))
            result = check_result(job, returned)
            if processor.output_model is not None:
                check_output(processor.output_model, result)
            return result
        finally:  # before the outcome is recorded, whatever it is
            job.run_s = time.monotonic() - began
            current_job.reset(token)

    async def _run_job_inner(self, job: Job) -> None:
        span = tracing.run_span(job)
        if span is None:  # tracing off: the common case, one look-up
            await self._attempt(job, None)
            return
        status = "interrupted"  # the worker stopped it: put back in the queue, or rescued later
        try:
            with span.current():  # log records and spans of the run belong to its span
                status = await self._attempt(job, span)
        finally:
            span.end(status)

    async def _attempt(self, job: Job, span: tracing.RunSpan | None) -> str:
        """Run one attempt and record its outcome; the status it left the job in (a job that
        retries or sleeps is `queued`)."""
        processor = self.processors[job.type]
        if self.reports is not None:
            self.reports.start(job)
        try:
            result = await self._call(processor, job)
        except asyncio.CancelledError:
            if job.cancelled:
                await self._reported(job)
                await self.outcomes.record_cancelled(job)
                return "cancelled"
            self._reported_later(job)
            raise
        except Suspension as suspension:
            await self._reported(job)
            if job.cancelled:
                await self.outcomes.record_cancelled(job)
                return "cancelled"
            if await self.outcomes.record_suspended(job, suspension.wait) and self.durability is not None:
                self.durability.wake_at(suspension.wait.until)
            return "queued"
        except Exception as exc:  # noqa: BLE001 - any processor error fails the job, recorded on it
            await self._reported(job)
            if span is not None:
                span.failed(exc)
            return await self.outcomes.record_failure(job, exc, permanent=isinstance(exc, PermanentJobError))
        await self._reported(job)
        if job.cancelled:
            await self.outcomes.record_cancelled(job)
            return "cancelled"
        if span is not None:
            tracing.carry(result.next_jobs)  # the next jobs' runs continue this run's trace
        self.outcomes.finished(job, result)
        return "waiting_approval" if result.requires_approval else "completed"

    async def _run_planned(self, job: Job, processor: AnyProcessor, executor: Executor,
                           limit: float | None) -> object:
        """`process` off the fast path: in a thread or a process, or under a time limit. Past
        the limit, an async run is cancelled, a process killed, and a thread abandoned (nothing
        can stop it): its slot is freed now, and its late result ignored."""
        try:
            async with asyncio.timeout(limit) as deadline:
                place = self.places.get(job.id, Place())
                if executor == "thread":
                    return await self.threads.run(_in_thread, processor, job, asyncio.get_running_loop(), place)
                if executor == "process" and self.pool is not None:
                    from jobdesk.runtime.processes import run_in_process  # loaded with the pool (see __init__)

                    return await run_in_process(job, processor, self.threads, self.pool, place)
                return await cast(BaseProcessor, processor).process(job)  # "async": a BaseProcessor's
        except TimeoutError:
            if not deadline.expired() or limit is None:
                raise  # the processor's own TimeoutError
            if executor == "thread":
                log.warning("job %s (%s) passed its time limit of %s; its thread cannot be stopped: it runs on, "
                            "and its result will be ignored", job.id, job.type, seconds_text(limit))
            raise JobTimedOut(timeout_text(limit)) from None

    def attempt_of(self, job_id: str) -> int | None:
        """The attempt of a job this worker runs or has claimed; None for one it does not hold."""
        held = self.running.get(job_id)
        job = held[0] if held is not None else next((j for j in self.ready if j.id == job_id), None)
        return job.attempt if job is not None else None

    async def stack_of(self, job_id: str) -> list[StackFrame] | None:
        """The current stack of a job this worker holds: empty for one claimed but not started,
        None for one it does not hold (any more)."""
        held = self.running.get(job_id)
        if held is None:
            return [] if any(job.id == job_id for job in self.ready) else None
        return await job_stack(held[1].get_coro(), self.places.get(job_id))

    def block_allowance(self) -> float | None:
        """How long the event loop may be blocked before this worker's lease lapses: the longest
        time limit of its running jobs; None (no end) when one of them has none, or none runs."""
        longest = 0.0
        for job, _ in list(self.running.values()):
            plan = self.plans.get(job.type)
            if plan is None or plan[1] is None:
                return None
            longest = max(longest, plan[1])
        return longest or None

    def type_on_loop(self, loop: asyncio.AbstractEventLoop) -> str | None:
        """The type of the job whose task is on `loop` now: called from the watchdog's thread
        while the loop is blocked (the loop then changes nothing under it)."""
        task = asyncio.current_task(loop)
        name = task.get_name() if task is not None else ""
        held = self.running.get(name[4:]) if name.startswith("job-") else None
        if held is None:
            return None
        plan = self.plans.get(held[0].type)
        return held[0].type if plan is None or plan[0] == "async" else None  # a thread or process job waits only
