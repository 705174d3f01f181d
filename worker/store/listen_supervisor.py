"""Keeping a LISTEN alive for an owner that polls whenever it is not: `ListenerSupervisor`.

The worker, the console and the HTTP API all need the same thing from their listen connection:
open it, check it with the heartbeat, open it again (with backoff) when it is lost or deaf, and
be told when to poll and when pushed notifications are back. Plain asyncio, no Qt: it runs as
well on a qasync loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jobdesk.core.errors import JobdeskError
from jobdesk.store.db import CONNECT_FAILURES
from jobdesk.store.listener import (
    DEFAULT_HEARTBEAT_S,
    NO_LISTEN_REASON,
    Handler,
    Listener,
    ListenerDeaf,
    Sender,
)

log = logging.getLogger(__name__)
STOP_RETRY_S = 0.5  # how long `stop` waits for its cancellation to end the task before asking again

# What opening or checking a listener raises when the database (or the path to it) is the trouble;
# anything else is a bug, logged with its traceback.
_EXPECTED: tuple[type[BaseException], ...] = (*CONNECT_FAILURES, JobdeskError)


class Cause(enum.Enum):
    """Why the owner polls."""

    NO_LISTEN = "no listen URL"  # nowhere to LISTEN (a transaction pooler without DATABASE_LISTEN_URL): for good
    UNAVAILABLE = "cannot listen"  # the listen connection could not be opened
    LOST = "lost"  # the listen connection dropped
    DEAF = "deaf"  # the connection answers, but its heartbeat did not come back


@dataclass(frozen=True)
class Polling:
    """The start of a spell of polling: its cause, and the reason as one line for a log."""

    cause: Cause
    reason: str

    def __str__(self) -> str:
        return self.reason


def _nothing(*_: object) -> None:
    pass


@dataclass(frozen=True)
class ListenTiming:
    """How often a supervisor checks its connection, and how it backs off (seconds)."""

    heartbeat_interval: float = DEFAULT_HEARTBEAT_S
    check_interval: float = 1.0
    retry_min: float = 0.5
    retry_max: float = 5.0
    relisten_max: float = 60.0


@dataclass(frozen=True)
class ListenWording:
    """What a supervisor is called (its task's `name`) and what it says in the log (on `logger`)."""

    subject: str = "notifications"
    meanwhile: str = "polling meanwhile"
    logger: logging.Logger = log
    no_listen_level: int = logging.INFO
    name: str = "listener"


class ListenerSupervisor:
    """Owns one `Listener` on `dsn` and keeps it listening; tells its owner when to poll.

    Contract:
    - `await start()` makes the first attempt, and returns once the owner has been told its
      outcome: `on_listening()`, or `on_polling(Polling)`. From then on the supervisor runs as a
      task of its own until `await stop()` (or `async with supervisor:`), which cancels that task
      and closes the connection; `stop()` may be called at any time, also twice. A supervisor
      runs once: after `stop()`, make a new one.
    - `handlers` maps each channel to a function that gets the NOTIFY payload; they run on the
      event loop, as asyncpg calls them, and must not block.
    - The owner's state goes back and forth between listening and polling, and each change is
      reported once: `on_polling(p)` when notifications may stop coming (the owner polls until
      told otherwise, and should read what it may have missed), `on_listening()` when they come
      again (the owner should read once what it missed meanwhile). Both are plain functions
      called on the loop; they must not block, and may start tasks. Attempts that fail while the
      owner already polls are silent.
    - `dsn` None: there is nowhere to listen (`listen_dsn()` said so): `on_polling` with
      `Cause.NO_LISTEN` and `NO_LISTEN_REASON` at start, and polling for good.
    - A listen connection that cannot be opened (the database away, a bad DATABASE_LISTEN_URL)
      or is lost is opened again with backoff (`timing`), from `retry_min` doubling up to
      `retry_max` seconds; a lost one first at once. One that is deaf (its heartbeat, sent through
      `send`, did not come back within `heartbeat_interval`) is dropped and opened again after a
      pause that doubles from `heartbeat_interval` up to `relisten_max` while it stays deaf; the
      owner is told it listens again only once the new connection has heard its own heartbeat.
    - It checks the connection every `check_interval` seconds (a round trip, and a heartbeat
      when one is due).
    - It logs one line per change (`wording`, on its `logger`): `subject` says what is listened
      for ("new jobs"), `meanwhile` what the owner does while it polls ("polling every 2 s").
      Losing the listener is a warning; polling for want of a listen URL is said at
      `no_listen_level`.
    """

    def __init__(self, dsn: str | None, handlers: Mapping[str, Handler], *,
                 on_listening: Callable[[], None] = _nothing,
                 on_polling: Callable[[Polling], None] = _nothing,
                 send: Sender | None = None, timing: ListenTiming | None = None,
                 wording: ListenWording | None = None) -> None:
        timing = timing or ListenTiming()
        wording = wording or ListenWording()
        self.dsn = dsn
        self.handlers = dict(handlers)
        self.on_listening = on_listening
        self.on_polling = on_polling
        self.send = send
        self.heartbeat_interval = timing.heartbeat_interval
        self.check_interval = min(timing.check_interval, timing.heartbeat_interval)
        self.retry_min, self.retry_max, self.relisten_max = timing.retry_min, timing.retry_max, timing.relisten_max
        self.log, self.subject, self.meanwhile = wording.logger, wording.subject, wording.meanwhile
        self.name = wording.name
        self.no_listen_level = wording.no_listen_level
        self._listening = False
        self._polling: Polling | None = None
        self._told = asyncio.Event()  # the owner knows the outcome of the first attempt
        self._probation = False  # after deafness: listening again once a heartbeat comes back
        self._relisten_pause = 0.0
        self._listener: Listener | None = None
        self._task: asyncio.Task[None] | None = None
        self._started = False

    @property
    def listening(self) -> bool:
        """Notifications are pushed: the owner need not poll."""
        return self._listening

    @property
    def heard(self) -> bool:
        """The current listen connection has heard its own heartbeat at least once."""
        return self._listener is not None and self._listener.heard

    @property
    def polling(self) -> Polling | None:
        """Why the owner polls; None while listening, and before start()."""
        return self._polling

    async def start(self) -> None:
        """Start supervising; return once the owner has been told listening or polling."""
        if self._started:
            raise RuntimeError(f"{self.name} was started before")
        self._started = True
        self._task = asyncio.create_task(self._run(), name=self.name)
        self._task.add_done_callback(self._ended)
        told = asyncio.create_task(self._told.wait(), name=f"{self.name}-start")
        try:
            await asyncio.wait({self._task, told}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            await self.stop()
            raise
        finally:
            told.cancel()

    async def stop(self, timeout: float = 2.0) -> None:
        """Cancel the task and close the connection (dropped if it does not close in `timeout` s)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # A cancellation can be lost on its way (Python 3.11's asyncio.wait_for returned the
            # result of a call that ended as it arrived, which the heartbeat check in _watch once
            # met; a library awaited there may do the same): the task then sleeps on, and a single
            # cancel would wait for it forever. Ask again until it ends.
            while not (await asyncio.wait({task}, timeout=STOP_RETRY_S))[0]:
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close(timeout)
        self._listening = False

    async def __aenter__(self) -> ListenerSupervisor:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    # -- internals --------------------------------------------------------------------------

    async def _run(self) -> None:
        if self.dsn is None:
            self._to_polling(Polling(Cause.NO_LISTEN, NO_LISTEN_REASON))
            return
        retry = self.retry_min
        while True:
            listener = Listener(self.dsn, self.handlers, send=self.send, heartbeat_interval=self.heartbeat_interval)
            try:
                await listener.open()
            except Exception as exc:  # noqa: BLE001 - the first is logged as the polling reason; retried
                self._note_unexpected(exc, "opening the listen connection")
                self._to_polling(Polling(Cause.UNAVAILABLE, _reason(exc)))
                await asyncio.sleep(retry)
                retry = min(retry * 2, self.retry_max)
                continue
            retry = self.retry_min
            self._listener = listener
            if not self._probation:
                self._to_listening()
            trouble = await self._watch(listener)
            self._listener = None
            listener.terminate()
            self._to_polling(trouble)
            if trouble.cause is Cause.DEAF:
                self._probation = True
                self._relisten_pause = min(max(self._relisten_pause * 2, self.heartbeat_interval),
                                           self.relisten_max)
                await asyncio.sleep(self._relisten_pause)

    async def _watch(self, listener: Listener) -> Polling:
        """Check the listener until it fails; return why."""
        timeout = 2 * self.heartbeat_interval  # the heartbeat's own send may hang on a busy pool
        while True:
            await asyncio.sleep(self.check_interval)
            try:
                async with asyncio.timeout(timeout):
                    await listener.ping()
            except ListenerDeaf as exc:
                return Polling(Cause.DEAF, _reason(exc))
            except TimeoutError:
                return Polling(Cause.DEAF, f"a heartbeat check did not end within {timeout:g} s")
            except Exception as exc:  # noqa: BLE001 - the connection is gone: logged as the reason, opened again
                self._note_unexpected(exc, "checking the listen connection")
                return Polling(Cause.LOST, _reason(exc))
            if listener.heard and self._probation:
                self._probation, self._relisten_pause = False, 0.0
                self._to_listening()

    def _to_listening(self) -> None:
        if self._listening:
            return
        was, self._polling, self._listening = self._polling, None, True
        if was is None:
            self.log.debug("listening for %s", self.subject)
        elif was.cause is Cause.DEAF:
            self.log.info("listening for %s again: the listener hears its heartbeat again", self.subject)
        else:
            self.log.info("listening for %s again", self.subject)
        self._tell(self.on_listening)

    def _to_polling(self, polling: Polling) -> None:
        if self._polling is not None:  # already polling: a retry that failed too
            return
        self._polling, self._listening = polling, False
        if polling.cause is Cause.NO_LISTEN:
            self.log.log(self.no_listen_level, "%s: %s", polling.reason, self.meanwhile)
        elif polling.cause is Cause.DEAF:
            self.log.warning("the listener for %s went deaf (%s) while the database answers; %s, and "
                             "listening again later", self.subject, polling.reason, self.meanwhile)
        elif polling.cause is Cause.LOST:
            self.log.warning("stopped listening for %s: the listen connection was lost (%s); %s, and "
                             "reconnecting", self.subject, polling.reason, self.meanwhile)
        else:
            self.log.warning("cannot listen for %s (%s); %s, and trying again", self.subject, polling.reason,
                             self.meanwhile)
        self._tell(lambda: self.on_polling(polling))

    def _tell(self, callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:  # the owner's bug: it must not stop the supervision
            self.log.exception("%s: the owner's callback failed", self.name)
        self._told.set()

    def _note_unexpected(self, exc: Exception, doing: str) -> None:
        if not isinstance(exc, _EXPECTED):
            self.log.error("%s: unexpected error %s", self.name, doing, exc_info=exc)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A bug ended the task: say so, and leave the owner polling."""
        if task.cancelled() or task.exception() is None:
            return
        self.log.error("%s stopped on an unexpected error", self.name, exc_info=task.exception())
        if self._listener is not None:
            self._listener.terminate()
            self._listener = None
        self._to_polling(Polling(Cause.LOST, "its supervision stopped on an error"))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
