"""What a running job is doing now: its stack, asked of the worker that runs it, and the last
one kept after the job ends. For the CLI (`jobdesk stack`), the HTTP API and the console.

The asker writes a request and notifies the worker, then reads (polling, with a short backoff)
until the worker has written a stack taken after the request, the job has ended, or the time is
up. Polling, so it works through a pooler in transaction mode, where nobody can LISTEN."""

from __future__ import annotations

import asyncio

from jobdesk.core.errors import JobNotFound, JobNotRunning, WorkerNotAnswering
from jobdesk.core.job_stack import ANSWER_WITHIN_S, JobStack
from jobdesk.service.base import ServiceBase
from jobdesk.store import job_stacks
from jobdesk.store.job_stacks import StackState

FIRST_POLL_S = 0.01  # the first read after the request; each next one waits twice as long,
LAST_POLL_S = 0.2  # up to this


class JobStacks(ServiceBase):
    """A running job's stack, and the last one kept."""

    async def job_stack(self, job_id: str, *, within: float = ANSWER_WITHIN_S) -> JobStack:
        """The job's stack now, from the worker that runs it (`running` true); for a job that
        runs no more, the last stack taken of it (`running` false), if one was ever taken.

        JobNotFound for an unknown job, JobNotRunning for one that does not run and has no stack
        kept, WorkerNotAnswering when its worker does not answer `within` seconds. A request
        that fails leaves nothing behind."""
        state = await self._state(job_id)
        if state.status == "in_progress" and state.worker_id is not None:
            live = await self._ask(job_id, state.worker_id, within)
            if live is not None:
                return live
            state = await self._state(job_id)  # it ended while asked
        if state.kept is not None:
            return state.kept
        raise JobNotRunning(f"job {job_id} is not running ({state.status})")

    async def _state(self, job_id: str) -> StackState:
        async with self.pool.acquire() as conn:  # the primary: what the worker has just written
            state = await job_stacks.job_state(conn, job_id)
        if state is None or not self._owns(state.user_id):
            raise JobNotFound(f"no job with id {job_id}")
        return state

    async def _ask(self, job_id: str, worker_id: str, within: float) -> JobStack | None:
        """The stack `worker_id` takes for this request; None if the job stops running there first."""
        loop = asyncio.get_running_loop()
        async with self.pool.acquire() as conn:
            request_id, asked_at = await job_stacks.ask(conn, job_id, worker_id)
        deadline = loop.time() + within
        delay = FIRST_POLL_S
        answered = False
        try:
            while True:
                await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
                delay = min(delay * 2, LAST_POLL_S)
                state = await self._state(job_id)
                if state.kept is not None and state.kept.taken_at >= asked_at:
                    answered = True
                    return state.kept
                if state.status != "in_progress" or state.worker_id != worker_id:
                    return None
                if loop.time() >= deadline:
                    raise WorkerNotAnswering(f"worker {worker_id} did not answer within {within:g} s "
                                             f"with the stack of job {job_id}", worker_id)
        finally:
            if not answered:
                async with self.pool.acquire() as conn:
                    await job_stacks.withdraw(conn, request_id)
