"""The console's link to PostgreSQL: a pool for queries, one LISTEN connection for pushed
changes (kept by a ListenerSupervisor, with polling while it is away or deaf), and reconnection
when the database goes away. Plain asyncio; Qt sees it through signals.

With DATABASE_READ_URL the console reads a replica and still acts and LISTENs on the primary. It
reads its own writes: `act` fences the service's reads after an action, and each refresh a
notification asks for is fenced too, so that reads go to the primary until the replica has
replayed the change (see `jobdesk.service.replica`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from PySide6.QtCore import QObject, Signal

from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.tasks import spawn
from jobdesk.core.errors import DatabaseUnavailable, JobdeskError
from jobdesk.core.settings import Settings
from jobdesk.service.jobs import JobService, prepare_schema
from jobdesk.store.db import CONNECTION_ERRORS, Database, describe, is_starting_up
from jobdesk.store.listen_supervisor import ListenerSupervisor, ListenTiming, ListenWording
from jobdesk.store.listener import JOB_CHANGES_CHANNEL, listen_dsn

log = logging.getLogger("jobdesk.console")
T = TypeVar("T")

# Bursts of NOTIFYs collapse into one refresh per this many seconds: at most two a second,
# however many jobs change, and a change still shows within a second (this, plus one read).
COALESCE_S = 0.5
# While a bulk action runs, each of its chunks changes a thousand jobs: the console refreshes at
# most this often, so that its reloads leave the event loop (and the database) to the run.
BULK_COALESCE_S = 1.0
POLL_S = 2.0  # without LISTEN, the console polls this often
RETRY_MAX_S = 5.0
RELISTEN_MAX_S = 60.0  # a deaf listener is tried again after a pause that doubles up to this
# After an action or a notification, how long the console waits for the read replica to replay
# the change before it reads the primary instead.
FENCE_WAIT_S = 0.5
FORCED_READ_ONLY = "opened read-only (--read-only, or the connection's profile)"


class ConsoleConnection(QObject):
    """Owns the database side of the console and reports what happens to it."""

    connected = Signal(str)  # a description of the database
    disconnected = Signal(str)  # why
    jobs_changed = Signal(object)  # a set of job ids, or None for "reload everything"
    writable_changed = Signal(bool)

    def __init__(self, dsn: str, settings: Settings, *, embedded: bool, read_only: bool = False) -> None:
        super().__init__()
        self.dsn = dsn
        self.settings = settings
        self.embedded = embedded
        self.forced_read_only = read_only
        self.client: JobService | None = None
        self.writable = False
        # Why nothing can be changed here, in a few words ("role viewer cannot change jobs"); None
        # while the console may act. Every disabled action's tooltip says it.
        self.read_only_reason: str | None = None
        self.is_connected = False
        self._listen: ListenerSupervisor | None = None  # while connected
        self._pending: set[str] = set()
        self._reload = False
        self._flush_handle: asyncio.TimerHandle | None = None
        self._bulk_runs = 0  # bulk actions under way (`bulk_changes`)
        self.bulk_coalesce_s = BULK_COALESCE_S
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def listening(self) -> bool:
        """Changes are pushed; otherwise the console polls every POLL_S."""
        return self._listen is not None and self._listen.listening

    def describe(self) -> str:
        replica = self.replica
        return ("embedded " if self.embedded else "") + describe(self.dsn) + \
            (f" · reads from {replica}" if replica is not None else "")

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep_connected(), name="console-connection")

    async def close(self) -> None:
        self._closing = True
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._drop()

    async def run(self, fn: Callable[[JobService], Awaitable[T]]) -> T:
        """Run `fn(service)`; a lost connection is reported and re-raised. Work cut short because
        the console is closing counts as cancelled, not as an error."""
        if self.client is None:
            if self._closing:
                raise asyncio.CancelledError("the console is closing")
            raise ConnectionError("not connected to the database")
        try:
            return await fn(self.client)
        except Exception as exc:  # re-raised: this only notes a lost connection on the way
            if self._closing:
                raise asyncio.CancelledError("the console is closing") from exc
            if isinstance(exc, (*CONNECTION_ERRORS, DatabaseUnavailable)):  # an enqueue says DatabaseUnavailable
                self._lost(exc)
            raise

    async def act(self, fn: Callable[[JobService], Awaitable[T]]) -> T:
        """`run` for an action (a write): afterwards the console's reads see it, from the read
        replica once it has replayed it, from the primary until then."""
        result = await self.run(fn)
        client = self.client
        if client is not None and client.replica is not None:
            await self._fence(client)
        return result

    @property
    def replica(self) -> str | None:
        """The read replica the console reads, in words; None when it reads the primary."""
        client = self.client
        return client.replica.describe() if client is not None and client.replica is not None else None

    @contextmanager
    def bulk_changes(self) -> Iterator[None]:
        """Around a bulk action: its flood of changes refreshes the console at most once per
        `bulk_coalesce_s`; when it ends, one full refresh shows the final state soon after."""
        self._bulk_runs += 1
        self._reschedule()  # a refresh already pending waits for the slower pace too
        try:
            yield
        finally:
            self._bulk_runs -= 1
            if not self._closing:
                self._queue(None)
                self._reschedule()  # the final refresh comes at the usual pace, not a second later

    # -- internals --------------------------------------------------------------------------

    async def _keep_connected(self) -> None:
        delay = 0.5
        while not self._closing:
            if not self.is_connected:
                try:
                    await self._open()
                    delay = 0.5
                except EXPECTED as exc:  # the database is not there (yet): try again later
                    self.disconnected.emit(reason(exc))
                    if not is_starting_up(exc):  # not while it stops or starts
                        self._revive_embedded()
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
                    continue
            await asyncio.sleep(POLL_S)
            if not self.listening:
                self._queue(None)  # no LISTEN (or it is lost, or deaf): poll; a lost database shows there

    def _revive_embedded(self) -> None:
        """A safety net: when this user's shared embedded server is gone (stopped by hand), start
        it again (`Database.revive`, as the worker does)."""
        try:
            if Database(self.dsn, embedded=self.embedded).revive():
                log.warning("the embedded database had stopped; started it again")
        except JobdeskError as exc:
            log.warning("could not start the embedded database again: %s", exc)

    async def _open(self) -> None:
        if self.embedded:  # a fresh embedded database is migrated on first use, as the CLI does
            await prepare_schema(self.dsn, embedded=True)
        self.client = await JobService.connect(self.dsn, settings=self.settings, source="console", pool_size=4,
                                                 plan_each_call=True, read_replica=True)
        try:
            await self._start_listening(self.client)
            self.read_only_reason = (FORCED_READ_ONLY if self.forced_read_only
                                     else await self.client.write_refusal())
            self.writable = self.read_only_reason is None
        except BaseException:
            await self._drop()
            raise
        self.is_connected = True
        self.connected.emit(self.describe())
        self.writable_changed.emit(self.writable)
        self._queue(None)  # whatever changed while we were away

    async def _start_listening(self, client: JobService) -> None:
        """LISTEN for changes where that works (DATABASE_LISTEN_URL behind a pooler); else poll.
        Each time the listener (re)connects or stops, the rows are reloaded: changes were missed."""
        self._listen = ListenerSupervisor(
            listen_dsn(self.dsn, self.settings), {JOB_CHANGES_CHANNEL: self._on_notify},
            on_listening=self._missed, on_polling=lambda _why: self._missed(), send=client.notify,
            timing=ListenTiming(heartbeat_interval=self.settings.JOB_LISTEN_HEARTBEAT_INTERVAL, check_interval=POLL_S,
                                retry_max=RETRY_MAX_S, relisten_max=RELISTEN_MAX_S),
            wording=ListenWording(subject="live updates", logger=log, name="console-listener",
                                  meanwhile=f"polling for changes every {POLL_S:.0f} s"))
        await self._listen.start()

    def _missed(self) -> None:
        """The listener (re)connected or stopped: reload what may have been missed. The reload
        also finds a database that went away. On connecting, `_open` reloads anyway."""
        if self.is_connected:
            self._queue(None)

    def _lost(self, exc: BaseException) -> None:
        if not self.is_connected:
            return
        self.is_connected = False
        self.disconnected.emit(reason(exc))
        spawn(self._drop(), "console-drop")

    async def _drop(self) -> None:
        listen, self._listen = self._listen, None
        client, self.client = self.client, None
        if client is not None:
            client.terminate()
        if listen is not None:
            await listen.stop(timeout=0.5)

    def _on_notify(self, payload: str) -> None:
        self._queue(None if payload == "*" else set(payload.split(",")))

    def _queue(self, ids: set[str] | None) -> None:
        if ids is None:
            self._reload = True
        else:
            self._pending |= ids
        if self._flush_handle is None:
            delay = self.bulk_coalesce_s if self._bulk_runs else COALESCE_S
            self._flush_handle = asyncio.get_running_loop().call_later(delay, self._flush)

    def _reschedule(self) -> None:
        """Move a pending refresh to the current pace."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
            if self._reload or self._pending:
                self._queue(None if self._reload else set())

    def _flush(self) -> None:
        self._flush_handle = None
        if self._closing:
            return
        ids: set[str] | None
        if self._reload:
            self._reload, self._pending, ids = False, set(), None
        elif self._pending:
            ids, self._pending = self._pending, set()
        else:
            return
        client = self.client
        if client is None or client.replica is None:
            self.jobs_changed.emit(ids)
        else:  # the change is on the primary: the refresh must not read a replica without it
            spawn(self._fenced_refresh(client, ids), "console-fence")

    async def _fenced_refresh(self, client: JobService, ids: set[str] | None) -> None:
        await self._fence(client)
        if not self._closing:
            self.jobs_changed.emit(ids)

    async def _fence(self, client: JobService) -> None:
        """Fence the reads at the primary's position now (waiting a little for the replica). When
        the primary cannot say, the refresh goes on; its reads report a lost database."""
        try:
            await client.fence_reads(wait=FENCE_WAIT_S)
        except EXPECTED as exc:
            log.warning("could not fence reads on the read replica: %s", reason(exc))
