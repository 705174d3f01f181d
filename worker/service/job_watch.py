"""One client's watch on job changes: a single LISTEN on `jobdesk_job_changes`, kept by a
`ListenerSupervisor`, fanned out in memory to every wait of that client.

The `jobs` table's triggers notify that channel once per statement, with the ids it changed (or
`*` when it changed too many to list). A wait subscribes to its job ids and is woken when one of
them may have changed; it is also woken whenever notifications stop or start coming again, so
that it reads at once and sets its pace: a slow safety re-read while listening, polling while
not (behind a transaction pooler without DATABASE_LISTEN_URL, or while the listener is lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection

from jobdesk.store.job_waiters import JobWaiters
from jobdesk.store.listen_supervisor import ListenerSupervisor, ListenTiming, ListenWording, Polling
from jobdesk.store.listener import DEFAULT_HEARTBEAT_S, JOB_CHANGES_CHANNEL, Sender

log = logging.getLogger("jobdesk.client")


class JobWatch:
    """Wakes the waits subscribed to a job when a notification names it. `listen_dsn` None:
    nowhere to LISTEN, the waits poll for good. `send` (a NOTIFY through the client's pool)
    carries the listener's heartbeat, so that a listener the changes do not reach is found deaf."""

    def __init__(self, listen_dsn: str | None, *, send: Sender | None = None,
                 heartbeat_interval: float = DEFAULT_HEARTBEAT_S, poll_s: float = 0.5) -> None:
        self._waiters = JobWaiters()
        self._starting: asyncio.Task[None] | None = None
        self._stopped = False
        self._supervisor = ListenerSupervisor(
            listen_dsn, {JOB_CHANGES_CHANNEL: self._waiters.on_changes},
            on_listening=self._on_listening, on_polling=self._on_polling, send=send,
            timing=ListenTiming(heartbeat_interval=heartbeat_interval, retry_min=1.0),
            wording=ListenWording(subject="job changes", logger=log, name="client-listener",
                                  meanwhile=f"waits for jobs read them every {poll_s:g} s"))

    @property
    def listening(self) -> bool:
        """Notifications are pushed: a wait need only read when woken (and now and then)."""
        return self._supervisor.listening

    @property
    def polling(self) -> Polling | None:
        """Why the waits poll; None while listening."""
        return self._supervisor.polling

    async def started(self) -> None:
        """Open the listen connection the first time (or find there is none), once for all the
        waits that ask at the same time; return once it is known whether the waits listen or poll."""
        if self._stopped:
            raise RuntimeError("the client was closed: it waits no more")
        if self._starting is None:
            self._starting = asyncio.create_task(self._supervisor.start(), name="client-listener-start")
        await asyncio.shield(self._starting)  # a wait cancelled meanwhile does not stop the start

    async def stop(self) -> None:
        """Close the listen connection, if it was opened, and wake every wait (each reads once more)."""
        starting, self._starting, self._stopped = self._starting, None, True
        if starting is None:
            return
        if not starting.done():
            starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await self._supervisor.stop()
        self._waiters.wake_all()

    def subscribe(self, job_ids: Collection[str]) -> contextlib.AbstractContextManager[asyncio.Event]:
        """One event, set whenever a notification names one of `job_ids`, names too many jobs to
        list, or the listener starts or stops listening. The caller clears it before each read."""
        return self._waiters.subscribe(job_ids)

    def _on_listening(self) -> None:
        self._waiters.wake_all()  # changes may have been missed while not listening

    def _on_polling(self, _polling: Polling) -> None:
        self._waiters.wake_all()  # read now, then at the polling pace

