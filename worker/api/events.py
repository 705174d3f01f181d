"""Job changes pushed to waiting requests: ONE LISTEN connection per API process, fanned out
in memory to every SSE stream and long-poll waiting on a job. Where there is no LISTEN (behind a
transaction pooler without DATABASE_LISTEN_URL, or while the listener is down or deaf), the hub
reads the waited-on jobs' versions in one query every POLL_S and wakes the waiters of those that
changed. A `ListenerSupervisor` keeps the LISTEN going and says which of the two applies."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from jobdesk.core.settings import Settings
from jobdesk.store.job_waiters import JobWaiters
from jobdesk.store.jobs import JobRow
from jobdesk.store.listen_supervisor import ListenerSupervisor, ListenTiming, ListenWording
from jobdesk.store.listener import JOB_CHANGES_CHANNEL, Sender, listen_dsn

log = logging.getLogger("jobdesk.api.events")

# Waiters read the job again at least this often, whatever the hub hears.
FALLBACK_POLL_S = 5.0
# Without LISTEN, how often the hub reads the versions of the jobs waited on.
POLL_S = 0.25

RowReader = Callable[[Sequence[str]], Awaitable[Sequence[JobRow]]]


class ChangeHub:
    """`send` (a NOTIFY through the API's pool) carries the listener's heartbeat, so that a listen
    URL where the changes do not arrive is found deaf; without it, the listen connection sends it."""

    def __init__(self, dsn: str, settings: Settings, read_rows: RowReader,
                 extra_handlers: dict[str, Callable[[str], None]] | None = None, *,
                 send: Sender | None = None) -> None:
        self._waiters = JobWaiters()
        self._dsn, self._settings, self._read_rows = dsn, settings, read_rows
        self._handlers = {JOB_CHANGES_CHANNEL: self._waiters.on_changes, **(extra_handlers or {})}
        self._send = send
        self._listen: ListenerSupervisor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._seen: dict[str, datetime] = {}  # polling: the version each waited-on job had
        self.stopping = asyncio.Event()

    def subscribe(self, job_id: str) -> contextlib.AbstractContextManager[asyncio.Event]:
        """An event set whenever the job may have changed (or the process is stopping)."""
        return self._waiters.subscribe([job_id])

    @property
    def listening(self) -> bool:
        return self._listen is not None and self._listen.listening

    def wake_all(self) -> None:
        self._waiters.wake_all()

    async def start(self) -> None:
        """Listen where that works (the service's pool has found out whether the URL goes
        through a pooler, which `listen_dsn` asks); poll the waited-on jobs whenever not listening."""
        self._listen = ListenerSupervisor(
            listen_dsn(self._dsn, self._settings), self._handlers,
            on_listening=self.wake_all,  # changes may have been missed while not listening
            send=self._send,
            timing=ListenTiming(heartbeat_interval=self._settings.JOB_LISTEN_HEARTBEAT_INTERVAL, retry_min=1.0),
            wording=ListenWording(subject="job changes", logger=log, name="api-listener",
                                  no_listen_level=logging.WARNING,
                                  meanwhile=f"waiting requests read their jobs' versions every {POLL_S:g} s"))
        await self._listen.start()
        self._tasks.append(asyncio.create_task(self._poll(), name="api-change-poll"))

    async def stop(self) -> None:
        self.stopping.set()
        self.wake_all()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._listen is not None:
            await self._listen.stop()

    async def _poll(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(POLL_S)
            if self.listening or not self._waiters:
                self._seen.clear()
                continue
            ids = self._waiters.job_ids()
            try:
                rows = {r.id: r.updated_at for r in await self._read_rows(ids)}
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the database is away: logged once, the waiters' reads say so
                if not failing:
                    log.warning("cannot read the jobs waited on (%s)", str(exc).splitlines()[0] if str(exc) else exc)
                failing = True
                continue
            failing = False
            for job_id in ids:
                now = rows.get(job_id)  # None: deleted, or no longer visible
                if job_id not in self._seen or self._seen[job_id] != now:
                    self._waiters.wake([job_id])
                if now is not None:
                    self._seen[job_id] = now
            for job_id in set(self._seen) - set(self._waiters.job_ids()):
                del self._seen[job_id]
