"""The worker's answers to operators who ask what a running job is doing (`jobdesk stack`), and
its poll, without LISTEN, for its running jobs' cancellations and stack requests.

A request is a row of `job_stack_requests` for this worker. The worker learns of it from the
control NOTIFY when it listens, or else from the query it already makes every poll interval for
its running jobs' cancellations (`job_stacks.running_news`), and from its heartbeat besides, for
a NOTIFY missed. It then takes its requests, takes each job's stack where the job's code runs
(`runtime.stacks`), and writes them over the jobs' last, for the askers to read. Nothing is read
or written while nobody asks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from jobdesk.core.job_stack import StackFrame
from jobdesk.store import job_stacks
from jobdesk.store.db import CONNECTION_ERRORS

log = logging.getLogger("jobdesk.worker")

TAKE_WITHIN_S = 3.0  # a stack not taken by then is not written
AGAIN_AFTER_S = 0.1  # a request for a job not held yet (its claim being read) is looked at again after this

DbCall = Callable[[Callable[[asyncpg.Connection], Awaitable[Any]]], Awaitable[Any]]
StackOf = Callable[[str], Awaitable["list[StackFrame] | None"]]


class StackAnswers:
    """Answers this worker's stack requests: one answer at a time, and one more after it when
    asked meanwhile (the one running may have taken its requests before the new one came)."""

    def __init__(self, db_call: DbCall, worker_id: str, stack_of: StackOf,
                 attempt_of: Callable[[str], int | None], held: Callable[[], list[str]]) -> None:
        self.db_call = db_call
        self.worker_id = worker_id
        self.stack_of = stack_of  # a held job's stack now (None: not held)
        self.attempt_of = attempt_of  # the attempt a held job runs
        self.held = held  # the jobs this worker runs or has claimed
        self.answered = 0  # stacks written, for tests and logs
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._closed = False

    def asked(self) -> None:
        """A request may be waiting: answer it soon."""
        if self._closed:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._again = False
        self._task = asyncio.create_task(self._answer_all(), name="jobdesk-stack-answers")

    async def poll(self, every_s: float, unheard: Callable[[], list[str]], cancel: Callable[[str], None]) -> None:
        """Without LISTEN (behind a pooler with no DATABASE_LISTEN_URL, or while the listener is
        away) no cancel or stack request is heard: look for both every `every_s` for the running
        jobs `unheard` gives (none while listening), in one query (job_stacks.running_news), so
        that `job.cancelled` turns true as soon as with LISTEN. (The heartbeat looks too, less
        often.) With LISTEN this reads nothing: the NOTIFY is heard."""
        while True:
            await asyncio.sleep(every_s)
            running = unheard()
            if not running:
                continue
            try:
                cancelled, asked = await self.db_call(lambda c: job_stacks.running_news(c, self.worker_id, running))
            except CONNECTION_ERRORS:
                continue
            for job_id in cancelled:
                cancel(job_id)
            if asked:
                self.asked()

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _answer_all(self) -> None:
        try:
            await self._answer()
            while self._again:
                self._again = False
                await self._answer()
        except CONNECTION_ERRORS:
            pass  # the asker gives up after a while; the next request is answered as usual
        except Exception:  # an answer never stops the worker
            log.exception("could not answer a request for a running job's stack")

    async def _answer(self) -> None:
        held = self.held()
        asked, waiting = await self.db_call(lambda c: job_stacks.take_requests(c, self.worker_id, held))
        if waiting:
            asyncio.get_running_loop().call_later(AGAIN_AFTER_S, self.asked)
        taken: list[tuple[str, int, list[StackFrame]]] = []
        for job_id in asked:
            attempt = self.attempt_of(job_id)
            if attempt is None:
                continue
            try:
                async with asyncio.timeout(TAKE_WITHIN_S):
                    frames = await self.stack_of(job_id)
            except TimeoutError:
                log.warning("the stack of job %s could not be taken within %.0f s", job_id, TAKE_WITHIN_S)
                continue
            if frames is not None:
                taken.append((job_id, attempt, frames))
        if taken:
            await self.db_call(lambda c: job_stacks.keep(c, self.worker_id, taken))
            self.answered += len(taken)
