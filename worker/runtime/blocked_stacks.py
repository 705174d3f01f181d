"""Stacks answered while the worker's event loop is blocked: a processor that calls blocking
code from an `async def` holds the loop, and with it the worker's usual answers (see
`runtime.stack_answers`). Yet that is when an operator most wants the stack, and it shows the
blocking call.

A thread of its own looks at the loop's watch (`runtime.watchdog`). Only while the loop has been
blocked for BLOCKED_FOR_S does it look for this worker's stack requests, every LOOK_EVERY_S, on a
connection of its own, as the lease keeper renews the lease (`runtime.lease`); it answers them
with the stacks taken from the loop's thread. While the loop is free it reads nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.runtime.execution import Execution
from jobdesk.runtime.stacks import blocked_stack
from jobdesk.runtime.watchdog import LoopWatch
from jobdesk.store import db, job_stacks

log = logging.getLogger("jobdesk.worker")

BLOCKED_FOR_S = 0.5  # a loop blocked this long answers from this thread
LOOK_EVERY_S = 0.25  # how often requests are looked for while it stays blocked
CONNECT_TIMEOUT_S = 5.0


class BlockedLoopAnswers:
    """Answers this worker's stack requests from a thread while its event loop is blocked."""

    def __init__(self, dsn: str, worker_id: str, watch: LoopWatch, execution: Execution) -> None:
        self.dsn = dsn
        self.worker_id = worker_id
        self.watch = watch
        self.execution = execution
        self.answered = 0  # stacks written from this thread
        self._loop_thread = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """From the event loop's thread, whose stack is taken when it blocks."""
        self._loop_thread = threading.get_ident()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._keep()), name="jobdesk-blocked-stacks",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    async def _keep(self) -> None:
        conn: asyncpg.Connection | None = None
        try:
            # This loop runs nothing else, so waiting on the thread's event blocks no one.
            while not self._stop.wait(LOOK_EVERY_S):
                if self.watch.blocked_for() < BLOCKED_FOR_S:
                    continue
                try:
                    if conn is None:
                        conn = await db.connect(self.dsn, timeout=CONNECT_TIMEOUT_S)
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        await self._answer(conn)
                except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError,
                        DatabaseUnavailable) as exc:
                    log.debug("could not answer a stack request while the event loop is blocked: %s", exc)
                    if conn is not None:
                        conn.terminate()
                    conn = None
        finally:
            if conn is not None:
                conn.terminate()

    async def _answer(self, conn: asyncpg.Connection) -> None:
        try:  # the loop is blocked: nothing changes these now (if it moves on meanwhile, next time)
            running = dict(self.execution.running)
            places = dict(self.execution.places)
        except RuntimeError:
            return
        taken, _ = await job_stacks.take_requests(conn, self.worker_id, list(running))
        stacks = []
        for job_id in taken:
            job, task = running[job_id]
            stacks.append((job_id, job.attempt, blocked_stack(task.get_coro(), self._loop_thread, places.get(job_id))))
        await job_stacks.keep(conn, self.worker_id, stacks)
        self.answered += len(stacks)
