"""The worker: claims jobs, runs them through their processors on asyncio, records results.

One claim loop takes as many runnable jobs as there are free slots in one statement. A flush
loop writes finished jobs in batches: whatever finished while the previous batch was being
written goes out in the next one, so completions cost one round trip per batch, not per job.

`Worker` composes the parts and runs them from start to stop: the database link (dblink), the
claim pumps (pump), the running jobs (execution), the writing of their outcomes (outcomes), the
LISTEN for new work (listening), and the supervisor's heartbeat.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import asyncpg

from jobdesk.core.limits import ClaimLimits, flow_configs
from jobdesk.core.processor import AnyProcessor
from jobdesk.observe.alerts import Alert, AlertSender
from jobdesk.runtime import scheduler
from jobdesk.runtime.blocked_stacks import BlockedLoopAnswers
from jobdesk.runtime.dblink import DbLink
from jobdesk.runtime.durable import Durability
from jobdesk.runtime.execution import Execution
from jobdesk.runtime.job_reports import Reports, run_logging
from jobdesk.runtime.lease import LeaseKeeper
from jobdesk.runtime.listening import worker_listener
from jobdesk.runtime.outcomes import Outcomes
from jobdesk.runtime.parts import Claiming, RunAids, Shared, TimeLimits
from jobdesk.runtime.process_pool import Recycling
from jobdesk.runtime.pump import PUMPS, Kicks, Pumps
from jobdesk.runtime.retention import Pruner
from jobdesk.runtime.stack_answers import StackAnswers
from jobdesk.runtime.supervisor import Supervisor
from jobdesk.runtime.threads import JobThreads
from jobdesk.runtime.type_watch import TypeWatch
from jobdesk.runtime.user_walks import UserIndexKeeper
from jobdesk.runtime.watchdog import LoopWatch
from jobdesk.store import flow_limits, job_stacks, transitions, type_limits
from jobdesk.store import rollup as stats_rollup
from jobdesk.store.listen_supervisor import ListenerSupervisor
from jobdesk.store.listener import NEW_JOBS_CHANNEL

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings
    from jobdesk.observe.metrics import WorkerMetrics

log = logging.getLogger("jobdesk.worker")

T = TypeVar("T")

ROLLUP_LAST_FLUSH_S = 5.0  # how long a stopping worker tries to write its last metrics
CLOSE_TIMEOUT_S = 5.0  # how long each last step of a stop (tasks, listener, pool) may take


async def together(*steps: Awaitable[object]) -> None:
    """Run `steps` at once; once every one has ended, raise the first failure, if any (none is
    left running behind a failure, as a cancelled sibling of a task group would be mid-write)."""
    for outcome in await asyncio.gather(*steps, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome


class Worker:
    """One worker process's engine. `run()` returns after a stop request, once drained."""

    def __init__(self, settings: Settings, dsn: str, processors: Mapping[str, AnyProcessor],
                 *, worker_id: str | None = None, revive: Callable[[], bool] | None = None,
                 type_caps: Mapping[str, int] | None = None) -> None:
        """`revive`, given for the embedded database, starts it again when it is gone;
        `type_caps` caps how many jobs of a type this worker runs at once (`--limit`)."""
        self.settings = settings
        self.dsn = dsn
        self.processors = processors
        self.types = sorted(processors)
        self.concurrency = settings.MAX_CONCURRENT_JOBS
        self.worker_id = worker_id or f"{socket.gethostname()[:40]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.draining = False  # finishing running jobs, then exiting
        self.stats = {"completed": 0, "failed_attempts": 0, "claimed": 0, "rounds": 0}
        self.rollup = stats_rollup.Rollup()  # this worker's share of the metrics rollup
        self.metrics: WorkerMetrics | None = None
        if settings.JOB_METRICS_PORT is not None:
            from jobdesk.observe.metrics import WorkerMetrics  # only workers that serve metrics load it

            self.metrics = WorkerMetrics(self.types, lambda: len(self.execution.running), lambda: self.stats["rounds"])
        self.alerts = AlertSender(settings.JOB_ALERT_URLS, digest_window_s=settings.JOB_ALERT_DIGEST_SECONDS)
        self._stop = asyncio.Event()  # set once: no new claims, no new starts
        self._hard_stop = asyncio.Event()
        self._put_back_on_timeout = True
        self.db = DbLink(dsn, revive=revive, metrics=self.metrics)
        self.kicks = Kicks(PUMPS)  # new work, a finished job, or a stop request
        self.outcomes = Outcomes(self.db, self.worker_id, settings, stats=self.stats, rollup=self.rollup,
                                 metrics=self.metrics, send_alert=self.send_alert)
        self.threads = JobThreads(self.concurrency)  # plain `def` processors and steps run here
        self.durability = Durability(self.db, self.worker_id, self.metrics, wake=self.kicks.new_work,
                                     threads=self.threads)
        self.reports = Reports(self.db, settings)  # each run's progress and log lines
        shared = Shared(self.db, self.worker_id, self.outcomes, self.kicks, self._stop, self.metrics, self.stats)
        self.execution = Execution(processors, self.concurrency, shared,
                                   RunAids(self.durability, self.reports, self.threads),
                                   TimeLimits(settings.JOB_TYPE_TIMEOUTS, settings.JOB_TIMEOUT))
        self.stacks = StackAnswers(self.db.call, self.worker_id, self.execution.stack_of,
                                   self.execution.attempt_of, self.known_ids)
        self.execution.recycle_processes(Recycling.of(settings))
        # The loop's watchdog, and the lease renewed from a thread of its own (see runtime.lease).
        self.watch = LoopWatch(lambda: self.execution.type_on_loop(self._loop) if self._loop is not None else None)
        self._loop: asyncio.AbstractEventLoop | None = None
        renew_s = min(settings.JOB_HEARTBEAT_INTERVAL, settings.JOB_LEASE_TIMEOUT / 3)
        self.lease = LeaseKeeper(dsn, self.worker_id, renew_s, self.watch, self.execution.block_allowance)
        self.blocked_stacks = BlockedLoopAnswers(dsn, self.worker_id, self.watch, self.execution)
        claiming = Claiming(self.types, settings.JOB_PROCESSOR_POLL_INTERVAL, ClaimLimits(local=dict(type_caps or {})))
        self.pumps = Pumps(shared, self.execution, claiming,
                           hearing=lambda: self.listening is not None and self.listening.listening)
        self.user_index = UserIndexKeeper(dsn)
        self.type_watch = TypeWatch(self.db, self.pumps, self.refresh_limits,
                                    poll=settings.JOB_PROCESSOR_POLL_INTERVAL, stop=self._stop,
                                    listening=lambda: self.listening is not None and self.listening.listening)
        # Made at start, once the pool has found out whether a pooler answers (no LISTEN through one).
        self.listening: ListenerSupervisor | None = None
        self.supervisor = Supervisor(self)
        self._tasks: list[asyncio.Task[None]] = []

    # -- what the supervisor and an operator drive ------------------------------------------

    @property
    def pool(self) -> asyncpg.Pool | None:
        return self.db.pool

    @property
    def limits(self) -> ClaimLimits:
        return self.pumps.limits

    @property
    def paused(self) -> bool:
        """An operator paused claims."""
        return self.pumps.paused

    def request_stop(self, *, put_back: bool = True) -> None:
        """Stop claiming; running jobs finish, then `run()` returns.

        With `put_back`, jobs still running after JOB_SHUTDOWN_TIMEOUT go back to the queue. A
        second request stops at once, putting the running jobs back.
        """
        running = len(self.execution.running)
        if self._stop.is_set():
            if not self._hard_stop.is_set():
                log.warning("second stop request: putting %d running job(s) back now", running)
            self._hard_stop.set()
            return
        log.info("stopping: no new claims; waiting for %d running job(s)", running)
        self._put_back_on_timeout = put_back
        self._stop.set()
        self.kicks.set()

    def kick(self) -> None:
        """Look for work now."""
        self.pumps.new_work()

    @property
    def state(self) -> str:
        """What the heartbeat reports: running, paused or draining."""
        if self.draining:
            return "draining"
        return "paused" if self.paused else "running"

    def pause(self) -> None:
        """Claim nothing more until `resume()`; running jobs go on."""
        self.pumps.paused = True

    def resume(self) -> None:
        self.pumps.paused = False
        self.kicks.set()

    def drain(self) -> None:
        """Finish the running jobs, claim nothing more, then exit."""
        self.draining = True
        self.request_stop(put_back=False)

    def send_alert(self, alert: Alert) -> None:
        """Queue an admin alert; delivery never holds up the worker."""
        self.alerts.send(alert)

    def running_ids(self) -> list[str]:
        return list(self.execution.running)

    def known_ids(self) -> list[str]:
        """Every job this worker holds: running, waiting for a slot, or finished but unwritten."""
        return [*self.execution.running, *(j.id for j in self.execution.ready), *self.outcomes.held_ids()]

    def cancel_running(self, job_id: str) -> None:
        self.execution.cancel(job_id)

    def stacks_asked(self) -> None:
        """An operator may wait for a running job's stack: answer."""
        self.stacks.asked()

    async def db_call(self, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """Run fn(conn), retrying while the database is unreachable (see DbLink.call)."""
        return await self.db.call(fn)

    async def refresh_limits(self) -> None:
        """Learn which of this worker's types have a global limit (another worker may have set
        one since): those are claimed under their limit, every other type as before."""
        await self.pumps.refresh_limits()
        if self.pumps.walks_users:
            self.user_index.ensure_soon()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)

    # -- from start to stop -----------------------------------------------------------------

    async def run(self, ready: Awaitable[object] | None = None) -> None:
        """`ready`: what must be done before the first claim besides the worker's own start (the
        schema checked, by `jobdesk worker`); it runs while the pool opens."""
        with run_logging(self.settings.JOB_LOG_LEVEL):  # the records of each run kept with its job
            await self._run(ready)

    async def _run(self, ready: Awaitable[object] | None) -> None:
        try:
            await together(self.db.open(size=max(2, min(self.settings.DB_POOL_SIZE, self.concurrency + 4))),
                           *([ready] if ready is not None else []))
        except BaseException:
            await self.db.close(CLOSE_TIMEOUT_S)
            raise
        try:
            await self._start()
            supervising = self._start_tasks()
            await self._stop.wait()
            await self._drain()
            try:  # what finished last goes into the metrics too, unless the database is away
                if not self.db.down:
                    async with asyncio.timeout(ROLLUP_LAST_FLUSH_S):
                        await stats_rollup.flush(self.db.call, self.rollup)
            except TimeoutError:
                log.warning("the last second of metrics was not written: the database did not answer")
            # A heartbeat still in flight would write "running" over the "stopped" below.
            supervising.cancel()
            await asyncio.gather(supervising, return_exceptions=True)
            await self.supervisor.stop()
            await self.alerts.close()
        finally:
            await self._close()
        log.info("worker %s stopped: %d completed, %d failed attempt(s), %d round trip(s) to claim "
                 "and complete", self.worker_id, self.stats["completed"], self.stats["failed_attempts"],
                 self.stats["rounds"])

    async def _start(self) -> None:
        """Everything before the first claim: metrics, LISTEN, alerts, registration, limits."""
        if self.metrics is not None and self.settings.JOB_METRICS_PORT is not None:
            self.metrics.serve(self.settings.JOB_METRICS_PORT)
        self.listening = worker_listener(self.db.dsn, self.settings,
                                         {NEW_JOBS_CHANNEL: self._on_new_jobs,
                                          transitions.CONTROL_CHANNEL: self._on_control},
                                         send=self.db.notify, on_listening=self._listening_again)
        self.alerts.start()
        self._loop = asyncio.get_running_loop()
        self.watch.start()
        self.blocked_stacks.start()
        # Three independent paths to the database at once, each a round trip or a connection of
        # its own: listening, registering (with the rescue of dead workers' jobs), and the limits.
        await together(self.listening.start(), self.supervisor.start(), self._learn_limits())
        self.lease.start()  # it renews the registration made above
        log.info("worker %s ready: %d slot(s), types %s", self.worker_id, self.concurrency,
                 ", ".join(self.types) or "(none)")

    async def _learn_limits(self) -> None:
        """Declare this worker's limits, and read the fleet's and the paused types, before the
        first claim: a paused type is never claimed, a limited one only under its limit."""
        s = self.settings
        await self.db.call(lambda c: type_limits.declare(c, s.JOB_TYPE_LIMITS))
        flows = flow_configs(self.types, s.JOB_RATE_LIMITS, s.JOB_USER_RATE_LIMITS, s.JOB_USER_LIMITS, s.JOB_FAIR_SHARE)
        await self.db.call(lambda c: flow_limits.declare(c, flows))
        await self.refresh_limits()
        await self.type_watch.read()

    def _start_tasks(self) -> asyncio.Task[None]:
        """Start the pumps and the loops beside them; return the supervisor's."""
        pool = self.db.pool
        assert pool is not None
        self._tasks = [*self.pumps.start(),
                       asyncio.create_task(self.outcomes.flush_loop(), name="jobdesk-flush"),
                       asyncio.create_task(self.type_watch.run(), name="jobdesk-type-watch"),
                       asyncio.create_task(self.reports.run(), name="jobdesk-job-reports"),
                       asyncio.create_task(Pruner(pool, self.settings, self.worker_id).run(), name="jobdesk-pruner"),
                       asyncio.create_task(scheduler.run_loop(self.db.call, self._stop), name="jobdesk-scheduler"),
                       asyncio.create_task(stats_rollup.run_loop(self.db.call, self.rollup, self._stop),
                                           name="jobdesk-rollup"),
                       asyncio.create_task(self.stacks.poll(self.settings.JOB_PROCESSOR_POLL_INTERVAL, self._deaf,
                                                            self.execution.cancel), name="jobdesk-cancels"),
                       asyncio.create_task(self.outcomes.tally.run(self._stop), name="jobdesk-job-tally"),
                       supervising := asyncio.create_task(self.supervisor.run(), name="jobdesk-supervisor")]
        for task in self._tasks:
            task.add_done_callback(self._task_died)
        return supervising

    def _deaf(self) -> list[str]:
        """Without LISTEN, the running jobs whose cancel or stack request could go unheard."""
        deaf = self.listening is not None and not self.listening.listening
        return [job.id for job, _ in self.execution.running.values() if not job.cancelled] if deaf else []

    def _listening_again(self) -> None:
        """The listener hears NOTIFYs again: what was said while it was away is read now (new jobs
        by a claim, the operators' type controls by the type watch)."""
        self.kicks.set()
        self.type_watch.changed()

    async def _close(self) -> None:
        """The way out, every step of it bounded: a worker asked to stop always exits."""
        self.durability.close()
        await self.stacks.close()
        await self.user_index.close()
        self.watch.stop()
        await asyncio.gather(*(asyncio.get_running_loop().run_in_executor(None, keeper.stop)
                               for keeper in (self.lease, self.blocked_stacks)))
        self.threads.close()
        self.execution.close()
        for task in self._tasks:
            task.cancel()
        _, stuck = await asyncio.wait(self._tasks, timeout=CLOSE_TIMEOUT_S) if self._tasks else (set(), set())
        if stuck:
            log.warning("tasks still running at exit: %s", ", ".join(sorted(t.get_name() for t in stuck)))
        if self.listening is not None:
            await self.listening.stop(CLOSE_TIMEOUT_S)
        await self.db.close(CLOSE_TIMEOUT_S)
        if self.metrics is not None:
            self.metrics.close()

    def _task_died(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self._stop.is_set():
            return
        exc = task.exception()
        if exc is not None:
            log.error("internal task %s crashed: %r; stopping", task.get_name(), exc, exc_info=exc)
            self.request_stop()

    async def _unclaim_ready(self) -> None:
        """Give back the jobs claimed but not started: a stopping worker starts nothing new."""
        if self.execution.ready:
            await self.outcomes.unclaim(self.execution.take_ready())

    async def _final_writes(self) -> None:
        await self._unclaim_ready()  # what a claim in flight when the stop came brought back
        await self.outcomes.flush_all()
        await self.outcomes.settle()

    async def _drain(self) -> None:
        await self.db.last_write(self._unclaim_ready, "give back the jobs claimed but not started")
        running = self.execution.running
        if running:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.settings.JOB_SHUTDOWN_TIMEOUT if self._put_back_on_timeout else None
            hard = asyncio.ensure_future(self._hard_stop.wait())
            while running and not hard.done():
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    log.warning("jobs still running after %.0f s", self.settings.JOB_SHUTDOWN_TIMEOUT)
                    break
                tasks = [t for _, t in running.values()]
                await asyncio.wait([*tasks, hard], timeout=left, return_when=asyncio.FIRST_COMPLETED)
            hard.cancel()
            if running:
                log.warning("putting %d running job(s) back in the queue", len(running))
                await self._put_back_running("worker stopped")
        # The pump writes what finished meanwhile, then returns.
        self.kicks.set()
        await asyncio.wait(self.pumps.tasks, timeout=self.settings.JOB_SHUTDOWN_TIMEOUT + 5)
        await self.db.last_write(self._final_writes, "record the last results")

    async def _put_back_running(self, reason: str) -> None:
        """Stop the running jobs and give them back to the queue without spending a retry."""
        ids = await self.execution.stop_running()
        await self.db.last_write(lambda: self.outcomes.put_back(ids, reason),
                                 f"put {len(ids)} running job(s) back in the queue")

    # -- what the listener hears ------------------------------------------------------------

    def _on_new_jobs(self, payload: str) -> None:
        self.pumps.new_work(transitions.notice_floor(payload))

    def _on_control(self, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if message.get("worker") == self.worker_id:
            self.supervisor.kick()
        if "types" in message:  # an operator paused, resumed or limited a type
            self.type_watch.changed()
        job_id = message.get("cancel")
        if job_id in self.execution.running:
            self.cancel_running(job_id)
        if message.get(job_stacks.WORKER_KEY) == self.worker_id:
            self.stacks.asked()
