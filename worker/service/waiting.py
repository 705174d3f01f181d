"""Waiting for jobs from Python: `wait`, `wait_many` and `run` of `JobClient`.

A wait ends when each job it waits on has reached a terminal status (completed, failed,
cancelled; a rejected job is failed) or waits for approval. It reads its jobs once, then only
when a notification names one of them (through the client's one LISTEN, `JobWatch`), with a
safety re-read every SAFETY_REREAD_S; where there is nothing to listen to, or while the listener
is lost, it reads them every POLL_S instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Self

from jobdesk.core.errors import JobNotFound, JobWaitTimeout
from jobdesk.core.models import TERMINAL_STATUSES, JobRecord, Status
from jobdesk.service.enqueue import Enqueueing
from jobdesk.service.job_watch import JobWatch
from jobdesk.service.replica import ReadReplica
from jobdesk.store import transitions

# A wait ends once its jobs are in one of these.
WAIT_ENDS_ON = TERMINAL_STATUSES | {Status.WAITING_APPROVAL}
# While listening, a wait reads its jobs at least this often, whatever it hears.
SAFETY_REREAD_S = 5.0
# While not listening, a wait reads its jobs this often.
POLL_S = 0.5
# A timeout's message names at most this many of the jobs not done (`statuses` holds them all).
NAMED_IN_TIMEOUT = 10


class Waiting(Enqueueing):
    """Waiting for jobs to finish. The client's one listen connection is opened on the first
    wait, shared by all its waits (and by its `as_actor` views), and closed with the client."""

    _watch: JobWatch | None = None

    async def wait(self, job_id: str, *, timeout: float | None = None) -> JobRecord:
        """Wait until the job has finished (completed, failed, cancelled) or waits for approval;
        return its record then. JobWaitTimeout after `timeout` seconds (None: no limit), naming
        the job and its status; JobNotFound for an unknown id."""
        [record] = await self.wait_many([job_id], timeout=timeout)
        return record

    async def wait_many(self, job_ids: Sequence[str], *, timeout: float | None = None) -> list[JobRecord]:
        """`wait` for several jobs at once: their records, in the order of `job_ids`, once every
        one of them has finished or waits for approval. JobWaitTimeout names those not done."""
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return []
        watch = self._job_watch()
        await watch.started()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        done: dict[str, JobRecord] = {}
        with watch.subscribe(ids) as woken:
            while True:
                woken.clear()  # before the read: a change during it wakes the next one
                pending = await self._read_waited([i for i in ids if i not in done])
                done.update((r.id, r) for r in pending if r.status in WAIT_ENDS_ON)
                if len(done) == len(ids):
                    return [done[i] for i in job_ids]
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    raise _timed_out([r for r in pending if r.id not in done], len(ids), timeout or 0)
                pause = SAFETY_REREAD_S if watch.listening else POLL_S
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(pause if left is None else min(pause, left)):
                        await woken.wait()

    async def run(self, type: str, input_data: dict[str, Any], *, timeout: float | None = None,
                  depends_on: Sequence[str] = (), user_id: int | None = None, pipeline_id: str | None = None,
                  priority: int = 0, id: str | None = None, scheduled_at: datetime | None = None,
                  unique_key: str | None = None) -> JobRecord:
        """Enqueue a job (as `enqueue`, with the same options) and `wait` for it; `timeout`
        counts the wait. For scripts and tests: a request handler should not hold its caller
        for as long as a job runs."""
        job_id = await self.enqueue(type, input_data, depends_on=depends_on, user_id=user_id,
                                    pipeline_id=pipeline_id, priority=priority, id=id,
                                    scheduled_at=scheduled_at, unique_key=unique_key)
        return await self.wait(job_id, timeout=timeout)

    def _view(self, actor: transitions.Actor, user_id: int | None, replica: ReadReplica | None) -> Self:
        view = super()._view(actor, user_id, replica)
        view._watch = self._job_watch()  # one listen connection for the pool and all its views
        return view

    async def close(self) -> None:
        """Close the listen connection (if a wait opened it), then the pool."""
        if self._watch is not None:
            await self._watch.stop()
        await super().close()

    def _job_watch(self) -> JobWatch:
        if self._watch is None:
            self._watch = JobWatch(self.database.listen_dsn() if self.database is not None else None,
                                   send=self.notify, heartbeat_interval=self.settings.JOB_LISTEN_HEARTBEAT_INTERVAL,
                                   poll_s=POLL_S)
        return self._watch

    async def _read_waited(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """These jobs' records, in one statement; JobNotFound if one is missing (or not visible)."""
        async with self.pool.acquire() as conn:
            records = await self._records(conn, job_ids)
        if len(records) < len(job_ids):
            found = {r.id for r in records}
            missing = [i for i in job_ids if i not in found]
            raise JobNotFound(f"no job with id {missing[0]}" if len(missing) == 1 else
                              f"no jobs with ids {', '.join(missing)}")
        return records


def _timed_out(pending: Sequence[JobRecord], total: int, timeout: float) -> JobWaitTimeout:
    """The error of a wait whose `pending` jobs (of `total`) did not finish within `timeout` s."""
    statuses = {r.id: str(r.status) for r in pending}
    if total == 1:
        [(job_id, status)] = statuses.items()
        return JobWaitTimeout(f"job {job_id} did not finish within {timeout:g} s: it is {status}", statuses)
    named = ", ".join(f"{job_id} ({status})" for job_id, status in list(statuses.items())[:NAMED_IN_TIMEOUT])
    more = f" and {len(statuses) - NAMED_IN_TIMEOUT} more" if len(statuses) > NAMED_IN_TIMEOUT else ""
    return JobWaitTimeout(f"{len(statuses)} of {total} jobs did not finish within {timeout:g} s: {named}{more}",
                          statuses)
