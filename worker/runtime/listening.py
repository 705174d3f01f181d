"""The worker's LISTEN for new jobs and control messages, kept going beside its pool.

`ListenWatch` owns the listen connection (worker.store.listener.Listener): it opens it again when
it drops, drops it when it goes deaf (its heartbeat does not come back) and listens again a
while later, and keeps trying, with backoff, while it cannot connect. The worker polls all the
while, so a listener that is gone only slows new work down. The log gets one line per change of
state (deaf, lost, cannot listen, listening again), not one per attempt.

The worker uses nothing but `open`, `run`, `close` and `heard`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from worker.core.settings import Settings
from worker.store.listener import NO_LISTEN_REASON, Handler, Listener, ListenerDeaf, Sender, listen_dsn

log = logging.getLogger("jobdesk.worker")

MAX_RETRY_S = 5.0  # the longest wait between attempts to connect again
MAX_DEAF_RETRY_S = 60.0  # the longest wait before listening again after the listener went deaf


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ListenWatch:
    """LISTEN on `handlers`' channels at the listen URL of `dsn` (DATABASE_LISTEN_URL when given);
    `on_listening` is called each time it listens again after a gap, when work may have been
    announced unheard. `send` carries the heartbeat (a NOTIFY through the worker's pool)."""

    def __init__(self, dsn: str, settings: Settings, handlers: Mapping[str, Handler], *, send: Sender,
                 on_listening: Callable[[], None]) -> None:
        self.db_dsn = dsn
        self.settings = settings
        given = bool(settings.DATABASE_LISTEN_URL) and dsn == settings.DATABASE_URL
        self.where = "DATABASE_LISTEN_URL" if given else "the database URL"
        self.handlers = dict(handlers)
        self.send = send
        self.on_listening = on_listening
        self.heartbeat = settings.JOB_LISTEN_HEARTBEAT_INTERVAL
        self.poll = settings.JOB_PROCESSOR_POLL_INTERVAL
        self._listener: Listener | None = None
        self._deaf = False  # the listener went deaf, and has not heard its heartbeat since
        self._unreachable = False  # the last attempt to listen failed, and the log says so

    @property
    def heard(self) -> bool:
        """Whether the listener is open and its heartbeat came back since it was opened."""
        return self._listener is not None and self._listener.heard

    async def open(self) -> None:
        """Listen, if this worker can. Behind a transaction pooler without DATABASE_LISTEN_URL,
        say once that it polls, and do not listen; when the listen URL does not answer, say so
        and poll until `run()` gets through. (Whether it goes through a pooler is known once the
        worker's pool has connected.)"""
        if listen_dsn(self.db_dsn, self.settings) is None:
            log.info("%s: polling for new jobs every %g s", NO_LISTEN_REASON, self.poll)
            return
        await self._open()

    async def _open(self) -> bool:
        """One attempt to listen; False when it failed (logged once per run of failures)."""
        dsn = listen_dsn(self.db_dsn, self.settings)
        assert dsn is not None
        listener = Listener(dsn, self.handlers, send=self.send, heartbeat_interval=self.heartbeat)
        try:
            await listener.open()
        except Exception as exc:  # polled meanwhile; tried again by run()
            if not self._unreachable:
                self._unreachable = True
                log.warning("cannot listen on %s: %s; polling for new jobs every %g s until it answers",
                            self.where, _reason(exc), self.poll)
            return False
        self._listener = listener
        return True

    async def run(self) -> None:
        """Keep LISTEN going; poll meanwhile. A dropped connection is opened again at once (with
        backoff); a deaf one is dropped, and listened to again a while later."""
        if listen_dsn(self.db_dsn, self.settings) is None:
            return
        delay = 0.2
        while True:
            await asyncio.sleep(min(1.0, self.heartbeat))
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
                                    "jobs every %g s, and listening again later", exc, self.poll)
                    delay = min(max(delay * 2, self.heartbeat), MAX_DEAF_RETRY_S)
                except Exception as exc:  # gone: opened again below
                    log.warning("the listen connection was lost (%s); opening it again", _reason(exc))
                self._listener.terminate()
                self._listener = None
                if self._deaf:
                    await asyncio.sleep(delay)
            was_unreachable = self._unreachable
            if await self._open():
                self._unreachable = False
                if not self._deaf or was_unreachable:
                    log.info("listening for new jobs again")
                self.on_listening()
            else:
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_S)

    async def close(self, timeout: float) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                await asyncio.wait_for(listener.close(), timeout)
            except TimeoutError:
                log.warning("the listener did not close in %.0f s", timeout)
