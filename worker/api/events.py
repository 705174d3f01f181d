"""Job changes pushed to waiting requests: ONE LISTEN connection per API process, fanned out
in memory to every SSE stream and long-poll waiting on a job."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

from worker.listener import Listener

log = logging.getLogger("worker.api.events")

JOB_CHANNEL = "jobdesk_job_changes"
PING_INTERVAL_S = 2.0
# Waiters read the job again at least this often, so a listener that is down only slows them.
FALLBACK_POLL_S = 5.0


class ChangeHub:
    def __init__(self, dsn: str, extra_handlers: dict[str, Callable[[str], None]] | None = None) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._listener = Listener(dsn, {JOB_CHANNEL: self._on_jobs, **(extra_handlers or {})})
        self._task: asyncio.Task[None] | None = None
        self.stopping = asyncio.Event()

    @contextlib.contextmanager
    def subscribe(self, job_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever the job may have changed (or the process is stopping)."""
        event = asyncio.Event()
        self._waiters.setdefault(job_id, set()).add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[job_id]

    @property
    def listening(self) -> bool:
        return self._listener.is_open

    def _on_jobs(self, payload: str) -> None:
        if payload == "*":
            self.wake_all()
            return
        for job_id in payload.split(","):
            for event in self._waiters.get(job_id, ()):
                event.set()

    def wake_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="api-listener")

    async def stop(self) -> None:
        self.stopping.set()
        self.wake_all()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._listener.close(), 2)

    async def _run(self) -> None:
        down = False
        while True:
            try:
                if not self._listener.is_open:
                    await self._listener.open()
                    if down:
                        log.warning("listening for job changes again")
                    down = False
                    self.wake_all()  # changes may have been missed while not listening
                await asyncio.sleep(PING_INTERVAL_S)
                await asyncio.wait_for(self._listener.ping(), PING_INTERVAL_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not down:
                    log.warning("not listening for job changes (%s); waiters poll meanwhile", exc)
                down = True
                self._listener.terminate()
                await asyncio.sleep(1.0)
