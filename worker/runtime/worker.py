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
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import asyncpg

from worker.core.errors import InvalidJob, JobdeskError, PermanentJobError
from worker.core.input_validation import check_job_input
from worker.core.limits import ClaimLimits
from worker.core.models import Job, JobCreate, ProcessorResult
from worker.core.processor import BaseProcessor
from worker.core.settings import Settings
from worker.observe.alerts import Alert, AlertSender, job_failed
from worker.runtime import scheduler
from worker.runtime.retention import Pruner
from worker.runtime.supervisor import Supervisor
from worker.store import rollup as stats_rollup
from worker.store import transitions, type_limits
from worker.store.db import CONNECTION_ERRORS, create_pool
from worker.store.listener import NO_LISTEN_REASON, Listener, ListenerDeaf, listen_dsn

if TYPE_CHECKING:
    from worker.observe.metrics import WorkerMetrics

log = logging.getLogger("jobdesk.worker")

NEW_JOBS_CHANNEL = "jobdesk_new_jobs"
CANCEL_GRACE_S = 0.5  # a cancelled processor may stop cleanly this long before its task is cancelled
MAX_BACKOFF_S = 5.0
REVIVE_EVERY_S = 2.0  # how often a worker on the embedded database tries to start it again
ROLLUP_LAST_FLUSH_S = 5.0  # how long a stopping worker tries to write its last metrics
CLOSE_TIMEOUT_S = 5.0  # how long each last step of a stop (tasks, listener, pool) may take
FINAL_WRITES_S = 10.0  # how long a stopping worker tries to give back or record what it holds
# Two pumps, each on its own connection, so that one's round trip overlaps the other's. Each
# claims only its lane of the jobs (transitions.Lane): without lanes, a claim met rows the other
# pump had just claimed, locked them on its way past, and made the other's completions wait for
# its commit; two pumps were then a third slower than one. With lanes they ran 20,000 no-op jobs
# about a fifth faster than one (../shared/bench-peers, our row).
PUMPS = 2
PREFETCH_BELOW_S = 0.05  # claim ahead only while jobs average less than this


class Kicks:
    """A wake-up flag per pump: a kick (a stop, a resume) reaches every pump, and each pump
    clears only its own, when it starts a round, so none misses a kick meant for its lane.

    A finished job wakes one waiting pump only (`one`), in turn: any pump writes it, and waking
    both sent the second one on a claim that found nothing. New work wakes every pump, or one
    when all wait (`new_work`), which then claims every lane (`alone`). Under a trickle of jobs
    from the HTTP API, this took the worker from 1,844 round trips for 6,380 jobs to 639 for
    6,380. A pump looks at the finished jobs before it waits again, so none is left when every
    pump was in a round."""

    def __init__(self, pumps: int) -> None:
        self._events = [asyncio.Event() for _ in range(pumps)]
        self._waiting = [False] * pumps
        self._turn = 0

    def set(self, *, but: int | None = None) -> None:
        for i, event in enumerate(self._events):
            if i != but:
                event.set()

    def new_work(self) -> None:
        """New jobs were announced: wake every pump, or one when all of them wait. That one
        claims every lane (`alone`): a lone batch of jobs then costs one claim, not one per lane."""
        if all(self._waiting):
            self.one()
        else:
            self.set()

    def alone(self, pump: int) -> bool:
        """Whether every other pump waits, and none was woken yet: this one's claim cannot meet
        theirs, and takes every lane. (One woken but not yet running is about to claim.)"""
        return all(self._waiting[i] and not self._events[i].is_set() for i in range(len(self._events)) if i != pump)

    def one(self) -> None:
        """Wake the next waiting pump, if any waits and none is woken already (the jobs that
        finish until it runs are all its own)."""
        count = len(self._events)
        if any(self._waiting[i] and self._events[i].is_set() for i in range(count)):
            return
        for step in range(count):
            i = (self._turn + step) % count
            if self._waiting[i]:
                self._turn = i + 1
                self._events[i].set()
                return

    def of(self, pump: int) -> asyncio.Event:
        return self._events[pump]

    async def wait(self, pump: int, timeout: float | None = None) -> None:
        """Wait for this pump's kick, at most `timeout` seconds (TimeoutError)."""
        self._waiting[pump] = True
        try:
            if timeout is None:
                await self._events[pump].wait()
            else:
                await asyncio.wait_for(self._events[pump].wait(), timeout)
        finally:
            self._waiting[pump] = False


class InvalidResult(Exception):
    """A processor returned something the engine cannot store."""


def _check_result(job: Job, result: Any) -> ProcessorResult:
    if not isinstance(result, ProcessorResult):
        raise InvalidResult(f"processor for {job.type!r} returned {type(result).__name__}, "
                            f"not ProcessorResult")
    if not isinstance(result.result_data, dict):
        raise InvalidResult("result_data must be a dict")
    try:
        transitions.json_text(result.result_data, "result_data")
    except InvalidJob as exc:
        raise InvalidResult(str(exc)) from None
    for child in result.next_jobs:
        if not isinstance(child, JobCreate):
            raise InvalidResult("next_jobs must hold JobCreate objects")
        try:
            transitions.json_text(child.input_data, f"input_data of next job {child.type!r}")
        except InvalidJob as exc:
            raise InvalidResult(str(exc)) from None
    return result


class Worker:
    """One worker process's engine. `run()` returns after a stop request, once drained."""

    def __init__(self, settings: Settings, dsn: str, processors: dict[str, BaseProcessor],
                 *, worker_id: str | None = None, revive: Callable[[], bool] | None = None,
                 type_caps: Mapping[str, int] | None = None) -> None:
        """`revive`, given for the embedded database, starts it again when it is gone;
        `type_caps` caps how many jobs of a type this worker runs at once (`--limit`)."""
        self.settings = settings
        self.revive = revive
        self._next_revive = 0.0
        self.dsn = dsn
        self.processors = processors
        self.types = sorted(processors)
        self.concurrency = settings.MAX_CONCURRENT_JOBS
        self.limits = ClaimLimits(local=dict(type_caps or {}))
        self.worker_id = worker_id or f"{socket.gethostname()[:40]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.pool: asyncpg.Pool | None = None
        self._listener: Listener | None = None
        self._deaf = False  # the listener went deaf, and has not heard its heartbeat since
        self._running: dict[str, tuple[Job, asyncio.Task[None]]] = {}
        self._ready: deque[Job] = deque()  # claimed, waiting for a free slot
        self._plain_done: list[tuple[Job, ProcessorResult]] = []  # written by the pump
        self._done: list[tuple[Job, ProcessorResult]] = []  # with next jobs or approval: own transaction
        self._done_event = asyncio.Event()
        self._kick = Kicks(PUMPS)  # new work, a finished job, or a stop request
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._avg_run_s: float | None = None
        self._reserved = 0  # slots a claim in flight may fill
        self._writing: set[str] = set()  # finished jobs whose results are being written
        self._stop = asyncio.Event()
        self._hard_stop = asyncio.Event()
        self._stopping = False
        self._put_back_on_timeout = True
        self.paused = False  # an operator paused claims
        self.draining = False  # finishing running jobs, then exiting
        self.alerts = AlertSender(settings.JOB_ALERT_URLS, digest_window_s=settings.JOB_ALERT_DIGEST_SECONDS)
        self.supervisor = Supervisor(self)
        self._tasks: list[asyncio.Task[None]] = []
        self._pumps: list[asyncio.Task[None]] = []
        self._free_idle_since: float | None = None  # the unlimited types had nothing to claim (see _pump)
        self._starved = False  # a pump found every free slot reserved by another (see _pump)
        self._db_down = False
        self.stats = {"completed": 0, "failed_attempts": 0, "claimed": 0, "rounds": 0}
        self.rollup = stats_rollup.Rollup()  # this worker's share of the metrics rollup
        self.metrics: WorkerMetrics | None = None
        if settings.JOB_METRICS_PORT is not None:
            from worker.observe.metrics import WorkerMetrics  # only workers that serve metrics load it

            self.metrics = WorkerMetrics(self.types, lambda: len(self._running), lambda: self.stats["rounds"])

    # -- lifecycle --------------------------------------------------------------------------

    def request_stop(self, *, put_back: bool = True) -> None:
        """Stop claiming; running jobs finish, then `run()` returns.

        With `put_back`, jobs still running after JOB_SHUTDOWN_TIMEOUT go back to the queue. A
        second request stops at once, putting the running jobs back.
        """
        if self._stopping:
            if not self._hard_stop.is_set():
                log.warning("second stop request: putting %d running job(s) back now", len(self._running))
            self._hard_stop.set()
            return
        log.info("stopping: no new claims; waiting for %d running job(s)", len(self._running))
        self._stopping = True
        self._put_back_on_timeout = put_back
        self._stop.set()
        self._kick.set()

    def kick(self) -> None:
        """Look for work now."""
        self._free_idle_since = None
        self._kick.new_work()

    @property
    def state(self) -> str:
        """What the heartbeat reports: running, paused or draining."""
        if self.draining:
            return "draining"
        return "paused" if self.paused else "running"

    def pause(self) -> None:
        """Claim nothing more until `resume()`; running jobs go on."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._kick.set()

    def drain(self) -> None:
        """Finish the running jobs, claim nothing more, then exit."""
        self.draining = True
        self.request_stop(put_back=False)

    def send_alert(self, alert: Alert) -> None:
        """Queue an admin alert; delivery never holds up the worker."""
        self.alerts.send(alert)

    def running_ids(self) -> list[str]:
        return list(self._running)

    def known_ids(self) -> list[str]:
        """Every job this worker holds: running, waiting for a slot, or finished but unwritten."""
        return [*self._running, *(j.id for j in self._ready), *(j.id for j, _ in self._plain_done),
                *(j.id for j, _ in self._done), *self._writing]

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)

    async def run(self) -> None:
        size = max(2, min(self.settings.DB_POOL_SIZE, self.concurrency + 4))
        self.pool = await create_pool(self.dsn, size=size, indexes_only=True)
        try:
            if self.metrics is not None and self.settings.JOB_METRICS_PORT is not None:
                self.metrics.serve(self.settings.JOB_METRICS_PORT)
            await self._listen()
            self.alerts.start()
            await self.supervisor.start()
            await self.db_call(lambda c: type_limits.declare(c, self.settings.JOB_TYPE_LIMITS))
            await self.refresh_limits()
            log.info("worker %s ready: %d slot(s), types %s", self.worker_id, self.concurrency,
                     ", ".join(self.types) or "(none)")
            self._pumps = [asyncio.create_task(self._pump(i), name=f"jobdesk-pump-{i + 1}") for i in range(PUMPS)]
            self._tasks = [*self._pumps,
                           asyncio.create_task(self._flush_loop(), name="jobdesk-flush"),
                           asyncio.create_task(self._listener_watch(), name="jobdesk-listener"),
                           asyncio.create_task(Pruner(self.pool, self.settings, self.worker_id).run(),
                                               name="jobdesk-pruner"),
                           asyncio.create_task(scheduler.run_loop(self.db_call, self._stop), name="jobdesk-scheduler"),
                           asyncio.create_task(stats_rollup.run_loop(self.db_call, self.rollup, self._stop),
                                               name="jobdesk-rollup"),
                           supervising := asyncio.create_task(self.supervisor.run(), name="jobdesk-supervisor")]
            for task in self._tasks:
                task.add_done_callback(self._task_died)
            await self._stop.wait()
            await self._drain()
            try:  # what finished last goes into the metrics too, unless the database is away
                if not self._db_down:
                    await asyncio.wait_for(stats_rollup.flush(self.db_call, self.rollup), ROLLUP_LAST_FLUSH_S)
            except TimeoutError:
                log.warning("the last second of metrics was not written: the database did not answer")
            # A heartbeat still in flight would write "running" over the "stopped" below.
            supervising.cancel()
            await asyncio.gather(supervising, return_exceptions=True)
            await self.supervisor.stop()
            await self.alerts.close()
        finally:
            for task in self._tasks:
                task.cancel()
            # Every step of the way out is bounded: a worker asked to stop always exits.
            _, stuck = await asyncio.wait(self._tasks, timeout=CLOSE_TIMEOUT_S) if self._tasks else (set(), set())
            if stuck:
                log.warning("tasks still running at exit: %s", ", ".join(sorted(t.get_name() for t in stuck)))
            if self._listener is not None:
                try:
                    await asyncio.wait_for(self._listener.close(), CLOSE_TIMEOUT_S)
                except TimeoutError:
                    log.warning("the listener did not close in %.0f s", CLOSE_TIMEOUT_S)
            try:
                await asyncio.wait_for(self.pool.close(), CLOSE_TIMEOUT_S)
            except TimeoutError:
                log.warning("connections still in use after %.0f s; closing them", CLOSE_TIMEOUT_S)
                self.pool.terminate()
            if self.metrics is not None:
                self.metrics.close()
        log.info("worker %s stopped: %d completed, %d failed attempt(s), %d round trip(s) to claim "
                 "and complete", self.worker_id, self.stats["completed"], self.stats["failed_attempts"],
                 self.stats["rounds"])

    def _task_died(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self._stopping:
            return
        exc = task.exception()
        if exc is not None:
            log.error("internal task %s crashed: %r; stopping", task.get_name(), exc, exc_info=exc)
            self.request_stop()

    async def _unclaim_ready(self) -> None:
        """Give back the jobs claimed but not started: a stopping worker starts nothing new."""
        if self._ready:
            unstarted, self._ready = [j.id for j in self._ready], deque()
            await self.db_call(lambda c: transitions.unclaim(c, self.worker_id, unstarted))

    async def _last_write(self, write: Callable[[], Awaitable[Any]], what: str) -> None:
        """One of a stopping worker's last writes, within FINAL_WRITES_S, and not tried once the
        database is known to be away: `db_call` would wait for it for ever, and the worker must
        exit. What was not written, the lease rescue takes back (another worker's, or this one's
        when it starts again); a job whose result was lost runs again."""
        if self._db_down:
            log.warning("could not %s: the database is unreachable", what)
            return
        try:
            await asyncio.wait_for(write(), FINAL_WRITES_S)
        except TimeoutError:
            log.warning("could not %s within %.0f s; the lease rescue takes back what this worker held",
                        what, FINAL_WRITES_S)

    async def _final_writes(self) -> None:
        await self._unclaim_ready()  # what a claim in flight when the stop came brought back
        await self._flush_all()
        if self._side_tasks:
            await asyncio.gather(*self._side_tasks, return_exceptions=True)

    async def _drain(self) -> None:
        await self._last_write(self._unclaim_ready, "give back the jobs claimed but not started")
        if self._running:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.settings.JOB_SHUTDOWN_TIMEOUT if self._put_back_on_timeout else None
            hard = asyncio.ensure_future(self._hard_stop.wait())
            while self._running and not hard.done():
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    log.warning("jobs still running after %.0f s", self.settings.JOB_SHUTDOWN_TIMEOUT)
                    break
                tasks = [t for _, t in self._running.values()]
                await asyncio.wait([*tasks, hard], timeout=left, return_when=asyncio.FIRST_COMPLETED)
            hard.cancel()
            if self._running:
                log.warning("putting %d running job(s) back in the queue", len(self._running))
                await self._put_back_running("worker stopped")
        # The pump writes what finished meanwhile, then returns.
        self._kick.set()
        await asyncio.wait(self._pumps, timeout=self.settings.JOB_SHUTDOWN_TIMEOUT + 5)
        await self._last_write(self._final_writes, "record the last results")

    async def _put_back_running(self, reason: str) -> None:
        """Stop the running jobs and give them back to the queue without spending a retry."""
        jobs = list(self._running.values())
        ids = [job.id for job, _ in jobs]
        for _, task in jobs:
            task.cancel()
        await asyncio.gather(*(t for _, t in jobs), return_exceptions=True)
        await self._last_write(lambda: self.db_call(lambda c: transitions.put_back(c, self.worker_id, ids, reason)),
                               f"put {len(ids)} running job(s) back in the queue")

    # -- database plumbing -----------------------------------------------------------------

    async def _listen(self) -> None:
        """LISTEN for new jobs and control messages (DATABASE_LISTEN_URL when given). Behind a
        transaction pooler without it, say once that this worker polls, and do not listen."""
        dsn = listen_dsn(self.dsn, self.settings)
        if dsn is None:
            log.info("%s: polling for new jobs every %g s", NO_LISTEN_REASON,
                     self.settings.JOB_PROCESSOR_POLL_INTERVAL)
            return
        pool = self.pool
        assert pool is not None
        listener = Listener(dsn, {NEW_JOBS_CHANNEL: self._on_new_jobs,
                                  transitions.CONTROL_CHANNEL: self._on_control},
                            send=lambda channel, payload: pool.execute("SELECT pg_notify($1, $2)", channel, payload),
                            heartbeat_interval=self.settings.JOB_LISTEN_HEARTBEAT_INTERVAL)
        await listener.open()
        self._listener = listener

    async def _listener_watch(self) -> None:
        """Keep LISTEN going; poll meanwhile. A dropped connection is opened again at once (with
        backoff); a deaf one is dropped, and listened to again a while later."""
        if listen_dsn(self.dsn, self.settings) is None:
            return
        heartbeat = self.settings.JOB_LISTEN_HEARTBEAT_INTERVAL
        delay = 0.2
        while True:
            await asyncio.sleep(min(1.0, heartbeat))
            if self._listener is not None:
                try:
                    await self._listener.ping()
                    if self._listener.heard:
                        delay = 0.2
                        if self._deaf:
                            self._deaf = False
                            log.info("the listener hears its heartbeat again: new jobs are pushed again")
                    continue
                except ListenerDeaf as exc:
                    if not self._deaf:
                        self._deaf = True
                        log.warning("the listener went deaf (%s) while the database answers; polling for new "
                                    "jobs every %g s, and listening again later", exc,
                                    self.settings.JOB_PROCESSOR_POLL_INTERVAL)
                    delay = min(max(delay * 2, heartbeat), 60.0)
                except Exception:  # gone: opened again below
                    pass
                self._listener.terminate()
                self._listener = None
                if self._deaf:
                    await asyncio.sleep(delay)
            try:
                await self._listen()
                if not self._deaf:
                    log.info("listening for new jobs again")
                self._kick.set()
            except Exception:
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    def _on_new_jobs(self, *_: object) -> None:
        self.kick()

    def _on_control(self, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if message.get("worker") == self.worker_id:
            self.supervisor.kick()
        job_id = message.get("cancel")
        if job_id in self._running:
            self.cancel_running(job_id)

    def cancel_running(self, job_id: str) -> None:
        if job_id not in self._running:
            return
        job, task = self._running[job_id]
        if job.cancel_event is not None:
            job.cancel_event.set()
        log.info("job %s cancelled by an operator", job_id)
        asyncio.get_running_loop().call_later(CANCEL_GRACE_S, lambda: task.done() or task.cancel())

    async def db_call(self, fn: Any) -> Any:  # noqa: ANN401
        """Run fn(conn), retrying with backoff while the database is unreachable, and after a
        deadlock or serialization failure (the transaction was rolled back whole)."""
        assert self.pool is not None
        delay = 0.1
        while True:
            try:
                async with self.pool.acquire() as conn:
                    result = await fn(conn)
                if self._db_down:
                    self._db_down = False
                    if self.metrics is not None:
                        self.metrics.db_reconnects += 1
                    log.warning("database is back")
                return result
            except asyncpg.TransactionRollbackError as exc:
                # A deadlock or a serialization failure rolled the whole transaction back: doing
                # it again is safe, and the worker must not stop over it.
                if self.metrics is not None:
                    self.metrics.db_errors += 1
                log.warning("database rolled back a transaction (%s); trying again", str(exc).splitlines()[0])
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)
            except CONNECTION_ERRORS as exc:
                if self.metrics is not None:
                    self.metrics.db_errors += 1
                if not self._db_down:
                    self._db_down = True
                    log.warning("database unreachable (%s); retrying", exc)
                if not isinstance(exc, asyncpg.CannotConnectNowError):  # not while it shuts down or starts
                    self._revive_database()
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    def _revive_database(self) -> None:
        """A safety net: the shared embedded database stops by itself only without clients, but
        `jobdesk db stop --force` or a foreground `jobdesk db` ending takes it away: start it again."""
        if self.revive is None or time.monotonic() < self._next_revive:
            return
        self._next_revive = time.monotonic() + REVIVE_EVERY_S
        try:
            if self.revive():
                log.warning("the embedded database had stopped; this worker started it again")
        except JobdeskError as exc:
            log.warning("could not start the embedded database again: %s", exc)

    # -- claiming and completing ------------------------------------------------------------

    async def refresh_limits(self) -> None:
        """Learn which of this worker's types have a global limit (another worker may have set
        one since): those are claimed under their limit, every other type as before."""
        fleet = await self.db_call(lambda c: type_limits.global_limits(c, self.types))
        if frozenset(fleet) != self.limits.fleet:
            self.limits = replace(self.limits, fleet=frozenset(fleet))
            if fleet:
                log.info("type limits: %s", ", ".join(f"{t}={n}" for t, n in sorted(fleet.items())))

    def _capacity(self) -> int:
        """Slots plus a small local queue, used only while jobs are short.

        Claiming a few jobs ahead saves a round trip per job when jobs take milliseconds; for
        long jobs it would only keep work from other workers, so it is off then.
        """
        short = self._avg_run_s is not None and self._avg_run_s < PREFETCH_BELOW_S
        return self.concurrency * 3 if short else self.concurrency

    async def _pump(self, index: int) -> None:
        """Record plain results and claim more work (of this pump's lane), one statement per round.

        PUMPS of them may run at once on separate connections; `_reserved` keeps them from
        claiming the same slots twice. Each asks for at most its share of the open slots, so that
        a pump whose lane is empty does not hold the slots another's lane could fill; a pump that
        found every slot reserved is woken when the holder gives back slots it did not fill.
        While the worker serves a limited type, the first pump alone claims, every lane: a limited
        claim is one serialized round, which a second pump would only cut in two. (Tried without
        the lock, as a swap of each round's finished jobs for as many new ones in the pump's own
        lane: with a limit of 10, two pumps carried 3.4 jobs per round trip instead of 10, and
        PostgreSQL's CPU per job grew by half, for 20-35 % fewer jobs/s than one pump.)
        """
        poll = self.settings.JOB_PROCESSOR_POLL_INTERVAL
        kick = self._kick.of(index)
        while True:
            kick.clear()  # a kick from now on is for the round below, or ends its wait
            limits = self.limits if self.limits.fleet or self.limits.local else None
            limited = limits.limited(self.types) if limits is not None else []
            solo = bool(limited) or PUMPS == 1
            if solo and index > 0:
                if self._stopping:
                    return
                await asyncio.sleep(poll)
                continue
            alone = solo or self._kick.alone(index)  # the other pumps wait: claim every lane
            lane: transitions.Lane = None if alone else (index, PUMPS)
            finished, self._plain_done = self._plain_done, []
            open_slots = 0 if self._stopping or self.paused else (
                self._capacity() - len(self._running) - len(self._ready))
            free = open_slots - self._reserved if alone else min(open_slots - self._reserved, -(-open_slots // PUMPS))
            if free <= 0 and not finished:
                if self._stopping and not self._running and not self._plain_done:
                    self._kick.set()  # let the other pump see it too
                    return
                if self._reserved:
                    self._starved = True
                await self._kick.wait(index)
                continue
            free = max(free, 0)
            self._reserved += free
            writing = {j.id for j, _ in finished}
            self._writing |= writing
            try:
                skip_free = (self._free_idle_since is not None and bool(limited) and free > 0
                             and time.monotonic() - self._free_idle_since < poll)
                written, jobs = await self.db_call(lambda c: transitions.complete_and_claim(
                    c, self.worker_id, self.types, free, finished, limits, free_idle=skip_free, lane=lane))
                if limited and free > 0 and not skip_free:
                    # The unlimited types gave nothing: leave them out until new work is announced
                    # or the poll interval passes (jobs whose retry time comes wake nobody).
                    self._free_idle_since = None if any(j.type not in limited for j in jobs) else time.monotonic()
            finally:
                self._reserved -= free
                self._writing -= writing
            self.stats["rounds"] += 1
            if finished:
                self._account(finished, written)
            self.stats["claimed"] += len(jobs)
            self._ready.extend(jobs)
            self._start_ready()
            if len(jobs) < free and self._starved:
                self._starved = False
                self._kick.set(but=index)  # slots this pump held and did not fill: another's lane may fill them
            if finished:
                await asyncio.sleep(0)  # jobs that finish in this same tick join the next round
            # Go on at once while there may be more: a full claim, or jobs finished meanwhile.
            # Otherwise sleep until a NOTIFY (dependants released by a completion are announced
            # too), a finished job or the poll interval; a kick that came during the round ends
            # the wait at once. A round that completed jobs used to go on at once as well, and
            # under a trickle of jobs its claim found nothing: a third of all round trips.
            if len(jobs) < free and not self._plain_done:
                try:
                    await self._kick.wait(index, poll)
                except TimeoutError:
                    pass

    def _start_ready(self) -> None:
        while self._ready and len(self._running) < self.concurrency and not self._stopping:
            self._start(self._ready.popleft())

    def _start(self, job: Job) -> None:
        job.cancel_event = asyncio.Event()
        if self.metrics is not None:
            stats = self.metrics.of(job.type)
            stats.started += 1
            stats.wait.observe(job.waited_s)
        task = asyncio.create_task(self._run_job(job), name=f"job-{job.id}")
        self._running[job.id] = (job, task)

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
            self._avg_run_s = took if self._avg_run_s is None else 0.9 * self._avg_run_s + 0.1 * took
            self._running.pop(job.id, None)
            self._start_ready()
            if self._stopping:
                self._kick.set()
            else:
                self._kick.one()

    async def _run_job_inner(self, job: Job) -> None:
        processor = self.processors[job.type]
        began = time.monotonic()
        try:
            try:
                check_job_input(processor, job)  # a mismatch is permanent: no retry can fix the input
                result = _check_result(job, await processor.process(job))
            finally:  # before the outcome is recorded, whatever it is
                job.run_s = time.monotonic() - began
        except asyncio.CancelledError:
            if job.cancelled:
                await self._record_cancelled(job)
                return
            raise
        except PermanentJobError as exc:
            await self._record_failure(job, exc, permanent=True)
            return
        except Exception as exc:
            await self._record_failure(job, exc, permanent=False)
            return
        if job.cancelled:
            await self._record_cancelled(job)
        elif result.next_jobs or result.requires_approval:
            self._done.append((job, result))
            self._done_event.set()
        else:
            self._plain_done.append((job, result))

    async def _record_cancelled(self, job: Job) -> bool:
        cancelled = bool(await self.db_call(lambda c: transitions.mark_cancelled(c, self.worker_id, job)))
        if cancelled and self.metrics is not None:
            self.metrics.of(job.type).cancelled += 1
        return cancelled

    async def _record_failure(self, job: Job, exc: BaseException, *, permanent: bool) -> None:
        error, trace = transitions.format_exception(exc)
        self.stats["failed_attempts"] += 1
        outcome = await self.db_call(lambda c: transitions.fail_attempt(
            c, self.worker_id, job, error, trace, intervals=self.settings.JOB_RETRY_INTERVALS,
            permanent=permanent))
        if not outcome.written:
            log.warning("job %s: lost ownership before its failure was recorded", job.id)
            return
        self.rollup.attempt_ended(job.type, job.waited_s, job.run_s, failed=outcome.status == "failed")
        if self.metrics is not None:
            stats = self.metrics.of(job.type)
            if outcome.status == "failed":
                stats.failed += 1
            else:
                stats.retried += 1
        if outcome.status == "failed":
            log.error("job %s (%s) failed for good after %d retries: %s", job.id, job.type,
                      outcome.retry_count, error)
            self.send_alert(job_failed(job.id, job.type, job.pipeline_id, job.user_id, job.attempt, error))
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
            writing = {j.id for j, _ in batch}
            self._writing |= writing
            try:
                await self._write(batch)
            finally:
                self._writing -= writing

    async def _write(self, batch: Sequence[tuple[Job, ProcessorResult]]) -> None:
        """Write results that create next jobs or wait for approval, each batch in a transaction."""
        refused: set[str] = set()
        try:
            written = await self.db_call(lambda c: transitions.complete_batch(c, self.worker_id, batch))
        except InvalidJob:
            # One result's next_jobs were refused; write the others and fail that one.
            written = set()
            for job, result in batch:
                try:
                    written |= await self.db_call(
                        lambda c, j=job, r=result: transitions.complete_batch(c, self.worker_id, [(j, r)]))
                except InvalidJob as exc:
                    await self._record_failure(job, exc, permanent=True)
                    refused.add(job.id)
        for job, result in batch:
            if result.requires_approval and job.id in written:
                log.info("job %s (%s) waits for approval: jobdesk approve %s", job.id, job.type, job.id)
        self._account(batch, written | refused, completed=written)

    def _account(self, batch: Sequence[tuple[Job, ProcessorResult]], written: set[str],
                 completed: set[str] | None = None) -> None:
        """`written`: the jobs whose outcome was recorded; `completed`, those of them that
        completed (all of them unless given)."""
        self.stats["completed"] += len(written)
        done = written if completed is None else completed
        for job, result in batch:
            if job.id in done:
                self.rollup.attempt_ended(job.type, job.waited_s, job.run_s, completed=not result.requires_approval)
                if self.metrics is not None:
                    self.metrics.of(job.type).completed += 1
        if len(written) < len(batch):
            for job, _ in batch:
                if job.id not in written:
                    task = asyncio.create_task(self._not_written(job), name=f"unwritten-{job.id}")
                    self._side_tasks.add(task)
                    task.add_done_callback(self._side_tasks.discard)

    async def _not_written(self, job: Job) -> None:
        """A finished job whose completion did not apply: cancelled meanwhile, already recorded
        (the answer to a write was lost with the connection), or no longer ours."""
        if await self._record_cancelled(job):
            log.info("job %s finished after it was cancelled; recorded as cancelled", job.id)
            return
        status = await self.db_call(lambda c: c.fetchval("SELECT status FROM jobs WHERE id = $1", job.id))
        if status not in ("completed", "waiting_approval"):
            log.warning("job %s finished, but this worker no longer owns it; result dropped", job.id)
