"""What keeps a worker honest beside running jobs: its heartbeat, operator commands, the rescue
of jobs whose worker died, cancellations it missed, and admin alerts.

The supervisor drives the worker only through `Supervised`, so it never imports the runner:
the runner depends on the supervisor, not the other way round.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

import asyncpg

from jobdesk.core.version import __version__
from jobdesk.observe.alerts import Alert, job_failed, worker_lost
from jobdesk.store import fleet, job_stacks, transitions
from jobdesk.store.db import CONNECTION_ERRORS

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

log = logging.getLogger("jobdesk.worker")

T = TypeVar("T")


class Supervised(Protocol):
    """What a supervisor needs of the worker it watches over."""

    worker_id: str
    settings: Settings
    concurrency: int
    types: list[str]

    @property
    def state(self) -> str:
        """running, paused or draining: what the heartbeat reports."""
        ...

    async def db_call(self, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """Run fn(conn), retrying while the database is unreachable."""
        ...

    def running_ids(self) -> list[str]: ...

    def known_ids(self) -> list[str]: ...

    def cancel_running(self, job_id: str) -> None: ...

    def stacks_asked(self) -> None:
        """An operator may wait for a running job's stack: answer."""
        ...

    def kick(self) -> None:
        """Look for work now."""
        ...

    def pause(self) -> None: ...

    async def refresh_limits(self) -> None:
        """Read which of its types have a global limit."""
        ...

    def resume(self) -> None: ...

    def drain(self) -> None:
        """Finish the running jobs, claim nothing more, then exit."""
        ...

    def request_stop(self, *, put_back: bool = True) -> None: ...

    def send_alert(self, alert: Alert) -> None: ...


class Supervisor:
    """Runs beside a worker; one per worker process."""

    def __init__(self, worker: Supervised) -> None:
        self.worker = worker
        settings = worker.settings
        self.interval = settings.JOB_HEARTBEAT_INTERVAL
        self.lease = settings.JOB_LEASE_TIMEOUT
        self._beat = asyncio.Event()

    async def start(self) -> None:
        """Register, and take back what dead workers left behind, before the first claim."""
        await self._register()
        await self.rescue()

    async def _register(self) -> None:
        w = self.worker
        await w.db_call(lambda c: fleet.register(c, w.worker_id, socket.gethostname(), os.getpid(),
                                                 w.concurrency, w.types, __version__))

    async def stop(self) -> None:
        w = self.worker
        try:
            async with asyncio.timeout(5):
                await w.db_call(lambda c: fleet.set_state(c, w.worker_id, "stopped"))
        except TimeoutError:
            log.warning("could not record that this worker stopped (database unreachable)")

    def kick(self) -> None:
        """Heartbeat now (a control NOTIFY arrived)."""
        self._beat.set()

    async def run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.interval):
                    await self._beat.wait()
            except TimeoutError:
                pass
            self._beat.clear()
            try:
                await self.tick()
            except CONNECTION_ERRORS:
                pass  # db_call already logs outages; the next tick tries again

    async def tick(self) -> None:
        w = self.worker
        requested, was_lost = await w.db_call(lambda c: fleet.heartbeat(c, w.worker_id, w.state))
        if was_lost:
            log.warning("this worker was declared lost (no heartbeat for %.0f s); its running jobs were "
                        "taken back and their results will be dropped", self.lease)
            await self._register()
        if requested:
            command = await w.db_call(lambda c: fleet.take_request(c, w.worker_id))
            if command:
                self.apply(command)
        running = list(w.running_ids())
        if running:  # a cancel or a stack request whose NOTIFY was missed
            cancelled, asked = await w.db_call(lambda c: job_stacks.running_news(c, w.worker_id, running))
            for job_id in cancelled:
                w.cancel_running(job_id)
            if asked:
                w.stacks_asked()
        known = w.known_ids()
        orphans = await w.db_call(lambda c: transitions.release_orphans(c, w.worker_id, known,
                                                                        max(5.0, 2 * self.interval)))
        if orphans:
            log.warning("gave back %d job(s) whose claim answer was lost with the connection", len(orphans))
            w.kick()
        await w.refresh_limits()
        await self.rescue()

    def apply(self, command: str) -> None:
        w = self.worker
        log.info("operator asked this worker to %s", command)
        if command == "pause":
            w.pause()
        elif command == "resume":
            w.resume()
        elif command == "drain":
            w.drain()
        elif command == "stop":
            w.request_stop()
        self._beat.set()  # report the new state at once

    async def rescue(self) -> None:
        w = self.worker
        lost = await w.db_call(lambda c: fleet.mark_stale_workers_lost(c, self.lease, w.worker_id))
        rows = await w.db_call(lambda c: transitions.rescue_lost_jobs(c, w.worker_id, self.lease,
                                                                      w.settings.JOB_RETRY_INTERVALS))
        for worker in lost:
            log.warning("worker %s on %s (pid %s) is lost: no heartbeat since %s", worker["id"], worker["host"],
                        worker["pid"], worker["heartbeat_at"])
            w.send_alert(worker_lost(worker["id"], worker["host"], worker["pid"],
                                     [r["id"] for r in rows if r["lost_worker"] == worker["id"]]))
        for row in rows:
            log.warning("job %s (%s) taken back from a lost worker: now %s", row["id"], row["type"], row["status"])
            if row["status"] == "failed":
                w.send_alert(job_failed(row["id"], row["type"], row["pipeline_id"], row["user_id"],
                                        row["attempts"], "worker lost"))
        if rows:
            w.kick()
