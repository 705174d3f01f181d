"""What became of the worker's jobs, written to the database: completions in batches, failures
and retries, cancellations, and the jobs a stopping worker gives back.

Plain completions (no next jobs, no approval) wait in `plain_done` for the pump, which writes
them in the same statement as its next claim. The others go to a flush loop that writes them in
batches: whatever finished while the previous batch was being written goes out in the next one,
so completions cost one round trip per batch, not per job.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from jobdesk.core.durable import Wait
from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import Job, ProcessorResult
from jobdesk.observe.alerts import Alert, job_failed
from jobdesk.observe.job_tally import JobTally
from jobdesk.runtime.dblink import DbLink
from jobdesk.store import durable, transitions
from jobdesk.store import rollup as stats_rollup

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings
    from jobdesk.observe.metrics import WorkerMetrics

log = logging.getLogger("jobdesk.worker")

Finished = tuple[Job, ProcessorResult]


class Outcomes:
    """Records the outcome of each job the worker ran, and counts it in `stats`, the rollup and
    the metrics."""

    def __init__(self, db: DbLink, worker_id: str, settings: Settings, *, stats: dict[str, int],
                 rollup: stats_rollup.Rollup, metrics: WorkerMetrics | None,
                 send_alert: Callable[[Alert], None]) -> None:
        self.db = db
        self.worker_id = worker_id
        self.settings = settings
        self.stats = stats
        self.rollup = rollup
        self.metrics = metrics
        self.send_alert = send_alert
        self.plain_done: list[Finished] = []  # written by the pump
        self.done: list[Finished] = []  # with next jobs or approval: own transaction
        self.done_event = asyncio.Event()
        self.writing: set[str] = set()  # finished jobs whose results are being written
        # Finished jobs whose completion did not apply, while `_not_written` finds out why: one
        # claimed again meanwhile gets its result written under that claim (`take_unwritten`).
        self.unwritten: dict[str, Finished] = {}
        # Jobs being written (`writing`) that a claim took again meanwhile, with that claim's attempt.
        self.reclaimed: dict[str, int] = {}
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.tally = JobTally(log)  # the DEBUG line of each finished job, the INFO summary a minute

    def finished(self, job: Job, result: ProcessorResult) -> None:
        """A job's processor returned `result`: queue it for the pump, or for the flush loop."""
        if result.next_jobs or result.requires_approval:
            self.done.append((job, result))
            self.done_event.set()
        else:
            self.plain_done.append((job, result))

    def held_ids(self) -> list[str]:
        """The finished jobs not written yet, or being written."""
        return [*(j.id for j, _ in self.plain_done), *(j.id for j, _ in self.done), *self.writing]

    async def record_cancelled(self, job: Job) -> bool:
        cancelled = bool(await self.db.call(lambda c: transitions.mark_cancelled(c, self.worker_id, job)))
        if cancelled:
            self.tally.cancelled(job.id, job.type, job.run_s)
        if cancelled and self.metrics is not None:
            self.metrics.of(job.type).cancelled += 1
        return cancelled

    async def record_suspended(self, job: Job, wait: Wait) -> bool:
        """Put a job that sleeps or waits back in the queue until its wait is over, without
        spending a retry. True if it waits (False: it runs again at once, or is no longer ours)."""
        state = await self.db.call(lambda c: durable.suspend(c, self.worker_id, job, wait))
        if state is None:
            if not await self.record_cancelled(job):
                log.warning("job %s: lost ownership before its suspension was recorded", job.id)
            return False
        if self.metrics is not None:
            self.metrics.of(job.type).suspended += 1
        log.debug("job %s (%s) suspended: %s until %s (%s)", job.id, job.type, wait.kind, wait.until, state)
        return state == "suspended"

    async def record_failure(self, job: Job, exc: BaseException, *, permanent: bool) -> str:
        """Record a failed attempt; the job's status then: `failed`, or `queued` for a retry
        (`in_progress` if another worker holds it now)."""
        error, trace = transitions.format_exception(exc)
        self.stats["failed_attempts"] += 1
        outcome = await self.db.call(lambda c: transitions.fail_attempt(
            c, self.worker_id, job, error, trace, intervals=self.settings.JOB_RETRY_INTERVALS,
            permanent=permanent))
        if not outcome.written:
            log.warning("job %s: lost ownership before its failure was recorded", job.id)
            return "in_progress"
        self.rollup.attempt_ended(job.type, job.waited_s, job.run_s, failed=outcome.status == "failed",
                                  attempt_failed=True)
        self.tally.failed(job.type, retried=outcome.status != "failed")
        if self.metrics is not None:
            stats = self.metrics.of(job.type)
            if outcome.status == "failed":
                stats.failed += 1
            else:
                stats.retried += 1
        if outcome.status == "failed":
            log.error("job %s (%s) failed for good after %d retries, in %.3f s: %s", job.id, job.type,
                      outcome.retry_count, job.run_s or 0.0, error)
            self.send_alert(job_failed(job.id, job.type, job.pipeline_id, job.user_id, job.attempt, error))
        else:
            log.info("job %s (%s) failed in %.3f s (%s); retry %d in %.1f s", job.id, job.type, job.run_s or 0.0, error,
                     outcome.retry_count, outcome.delay or 0)
        return str(outcome.status)

    async def unclaim(self, job_ids: Sequence[str]) -> None:
        """Give back jobs claimed but never started, as if they had not been claimed."""
        await self.db.call(lambda c: transitions.unclaim(c, self.worker_id, job_ids))

    async def put_back(self, job_ids: Sequence[str], reason: str) -> None:
        """Give stopped jobs back to the queue without spending a retry."""
        await self.db.call(lambda c: transitions.put_back(c, self.worker_id, job_ids, reason))

    # -- completing -------------------------------------------------------------------------

    async def flush_loop(self) -> None:
        while True:
            await self.done_event.wait()
            await self.flush_all()

    async def flush_all(self) -> None:
        while self.done:
            batch, self.done = self.done, []
            self.done_event.clear()
            writing = {j.id for j, _ in batch}
            self.writing |= writing
            try:
                await self._write(batch)
            finally:
                self.writing -= writing

    async def _write(self, batch: Sequence[Finished]) -> None:
        """Write results that create next jobs or wait for approval, each batch in a transaction."""
        refused: set[str] = set()
        try:
            written = await self.db.call(lambda c: transitions.complete_batch(c, self.worker_id, batch))
        except InvalidJob:
            # One result's next_jobs were refused; write the others and fail that one.
            written = set()
            for job, result in batch:
                one = [(job, result)]
                try:
                    written |= await self.db.call(lambda c: transitions.complete_batch(c, self.worker_id, one))
                except InvalidJob as exc:
                    await self.record_failure(job, exc, permanent=True)
                    refused.add(job.id)
        for job, result in batch:
            if result.requires_approval and job.id in written:
                log.info("job %s (%s) waits for approval: jobdesk approve %s", job.id, job.type, job.id)
        self.account(batch, written | refused, completed=written)

    def account(self, batch: Sequence[Finished], written: set[str], completed: set[str] | None = None) -> None:
        """`written`: the jobs whose outcome was recorded; `completed`, those of them that
        completed (all of them unless given)."""
        self.stats["completed"] += len(written)
        done = written if completed is None else completed
        for job, result in batch:
            if job.id in done:
                self.rollup.attempt_ended(job.type, job.waited_s, job.run_s, completed=not result.requires_approval)
                self.tally.completed(job.id, job.type, job.run_s, approval=result.requires_approval)
                if self.metrics is not None:
                    self.metrics.of(job.type).completed += 1
        if len(written) < len(batch) or self.reclaimed:
            for job, result in batch:
                again = self.reclaimed.pop(job.id, None)
                if job.id in written:
                    continue
                if again is not None:  # claimed again while this write was on its way: write it under that claim
                    job.attempt = again
                    self.finished(job, result)
                    continue
                self.unwritten[job.id] = (job, result)
                task = asyncio.create_task(self._not_written(job), name=f"unwritten-{job.id}")
                self._side_tasks.add(task)
                task.add_done_callback(self._side_tasks.discard)

    async def _not_written(self, job: Job) -> None:
        """A finished job whose completion did not apply: cancelled meanwhile by an operator
        (recorded so only then), already recorded (the answer to a write was lost with the
        connection), queued again with its claim lost in a failover (its result is written
        now), claimed again by this worker (the claim's answer, on its way, takes the result:
        `take_unwritten`), or no longer ours (taken back, and claimed by another)."""
        keep = False
        try:
            if await self.record_cancelled(job):
                log.info("job %s finished after it was cancelled; recorded as cancelled", job.id)
                return
            held = self.unwritten.get(job.id)
            completed: set[str] = set()
            if held is not None:
                completed = await self.db.call(lambda c: transitions.complete_lost_claims(c, [held]))
            if held is not None and completed:
                log.warning("job %s: its claim was lost (a failover?) while it ran; its result is written now",
                            job.id)
                self.account([held], {job.id})
                return
            row = await self.db.call(lambda c: c.fetchrow("SELECT status, worker_id FROM jobs WHERE id = $1", job.id))
            if job.id not in self.unwritten:
                return  # claimed again meanwhile: its result is written under that claim
            status = None if row is None else row["status"]
            if status == "in_progress" and row is not None and row["worker_id"] == self.worker_id:
                # A claim of this worker took it again and committed, but its answer has not been
                # read yet (a claim round runs beside this check): that answer takes the result.
                keep = True
                return
            if status not in ("completed", "waiting_approval"):
                log.warning("job %s finished, but this worker no longer owns it; result dropped", job.id)
        finally:
            if not keep:
                self.unwritten.pop(job.id, None)

    def claimed_again(self, claimed: Job) -> bool:
        """A job claimed again whose result this worker holds: written under the new claim,
        not run again. Whether it was one."""
        if claimed.id in self.writing:
            self.reclaimed[claimed.id] = claimed.attempt
            return True
        return self.take_unwritten(claimed)

    def take_unwritten(self, claimed: Job) -> bool:
        """A job claimed again whose result this worker holds, unwritten: queue the result to be
        written under the new claim (instead of running the job again); whether it was one."""
        held = self.unwritten.pop(claimed.id, None)
        if held is None:
            return False
        job, result = held
        job.attempt = claimed.attempt
        self.finished(job, result)
        return True

    async def settle(self) -> None:
        """Wait for the checks of finished jobs whose completion did not apply."""
        if self._side_tasks:
            await asyncio.gather(*self._side_tasks, return_exceptions=True)
