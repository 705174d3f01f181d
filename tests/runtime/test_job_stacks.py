"""A running job's stack, asked of a real worker on a real PostgreSQL, for each executor; the
stack kept after the job ends; and each refusal, with nothing kept."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.errors import JobNotFound, JobNotRunning, WorkerNotAnswering
from jobdesk.core.job_stack import JobStack
from jobdesk.core.models import JobCreate
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from jobdesk.store import fleet, transitions
from tests.helpers import RunningWorker, start_worker, stop_workers, wait_for
from tests.pgbouncer import PgBouncer
from tests.stack_processors import AsyncHold, ProcessHold, ThreadHold


async def running(conn: asyncpg.Connection, job_id: str) -> bool:
    return await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "in_progress"


async def finished(conn: asyncpg.Connection, job_id: str) -> bool:
    return await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "completed"


async def service(dsn: str) -> JobService:
    return await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), source="cli", pool_size=2)


def functions(stack: JobStack) -> list[str]:
    return [f.function for f in stack.frames]


async def stack_in(jobs: JobService, job_id: str, function: str) -> JobStack | None:
    """The job's stack once its code has reached `function` (a child process takes a moment to start)."""
    stack = await jobs.job_stack(job_id)
    return stack if function in functions(stack) else None


async def stack_of_held(conn: asyncpg.Connection, dsn: str, holds: AsyncHold | ThreadHold) -> JobStack:
    """The stack of a `hold` job, asked while it runs on a worker of its own; released after."""
    [job_id] = await transitions.enqueue(conn, [JobCreate("hold", {})])
    worker = RunningWorker(dsn, {"hold": holds})
    jobs = await service(dsn)
    try:
        await wait_for(lambda: running(conn, job_id), what="the job to run")
        stack = await jobs.job_stack(job_id)
    finally:
        holds.release.set()
        await worker.stop()
        await jobs.close()
    assert stack.worker_id == worker.worker.worker_id
    return stack


async def test_an_async_job_shows_its_task_and_the_coroutines_it_awaits(conn: asyncpg.Connection, dsn: str) -> None:
    stack = await stack_of_held(conn, dsn, AsyncHold())
    assert stack.running and stack.status == "in_progress" and stack.attempt == 1
    names = functions(stack)
    # Outermost first: the processor's `process`, the coroutine it awaits, then asyncio's wait.
    assert names[:2] == ["process", "hold_async"], names
    assert names[-1] == "wait" and stack.frames[-1].file.endswith("asyncio/locks.py")
    assert stack.frames[1].source == "await self.release.wait()  # the async job waits here"
    assert stack.frames[0].file.endswith("tests/stack_processors.py")
    assert "Stack of job" in stack.text() and 'in hold_async\n    await self.release.wait()' in stack.text()


async def test_a_thread_job_shows_its_thread(conn: asyncpg.Connection, dsn: str) -> None:
    stack = await stack_of_held(conn, dsn, ThreadHold())
    names = functions(stack)
    assert names[:2] == ["process", "hold_in_thread"], names
    assert stack.frames[1].source == "while not release.wait(0.05):  # the thread job waits here"
    assert names[-1] == "wait" and stack.frames[-1].file.endswith("threading.py")


async def test_a_process_job_answers_from_its_child(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    release = tmp_path / "release"
    [job_id] = await transitions.enqueue(conn, [JobCreate("hold", {"release": str(release)})])
    worker = RunningWorker(dsn, {"hold": ProcessHold()})
    jobs = await service(dsn)
    next_release = tmp_path / "next"
    try:
        await wait_for(lambda: running(conn, job_id), what="the job to run")
        stack = await wait_for(lambda: stack_in(jobs, job_id, "hold_in_process"), what="the child to run")
        again = await jobs.job_stack(job_id)  # the child answers each time it is asked
        pool = worker.worker.execution.pool
        assert pool is not None
        first_child = pool.running[job_id][0].pid
        release.touch()
        await wait_for(lambda: finished(conn, job_id), what="the first job to end")
        # The next job runs in the same child, reused, which answers for that job's run.
        [next_id] = await transitions.enqueue(conn, [JobCreate("hold", {"release": str(next_release)})])
        await wait_for(lambda: running(conn, next_id), what="the next job to run")
        reused = await wait_for(lambda: stack_in(jobs, next_id, "hold_in_process"), what="the child to answer")
        assert pool.running[next_id][0].pid == first_child
    finally:
        release.touch()
        next_release.touch()
        await worker.stop()
        await jobs.close()
    assert functions(stack) == ["process", "hold_in_process"], stack.text()
    assert stack.frames[1].source == "time.sleep(0.02)  # the process job waits here"
    assert again.taken_at > stack.taken_at and functions(again) == functions(stack)
    assert reused.job_id == next_id and functions(reused) == functions(stack)


async def test_the_last_stack_is_kept_after_the_job_ends(conn: asyncpg.Connection, dsn: str) -> None:
    holds = AsyncHold()
    [job_id] = await transitions.enqueue(conn, [JobCreate("hold", {})])
    worker = RunningWorker(dsn, {"hold": holds})
    jobs = await service(dsn)
    try:
        await wait_for(lambda: running(conn, job_id), what="the job to run")
        live = await jobs.job_stack(job_id)
        holds.release.set()
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the job to complete")
        kept = await jobs.job_stack(job_id)
    finally:
        holds.release.set()
        await worker.stop()
        await jobs.close()
    assert not kept.running and kept.status == "completed"
    assert (kept.taken_at, kept.attempt, kept.frames) == (live.taken_at, 1, live.frames)
    assert kept.headline().endswith("; the job has ended since (completed):")
    assert kept.to_json()["running"] is False


async def test_a_job_not_running_without_a_stack_is_refused(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("nobody.runs.this", {})])
    jobs = await service(dsn)
    try:
        with pytest.raises(JobNotRunning) as refused:
            await jobs.job_stack(job_id)
        with pytest.raises(JobNotFound):
            await jobs.job_stack("no-such-job")
    finally:
        await jobs.close()
    assert str(refused.value) == f"job {job_id} is not running (queued)"
    assert await conn.fetchval("SELECT count(*) FROM job_stack_requests") == 0


async def test_a_worker_that_does_not_answer_is_named_and_nothing_is_kept(conn: asyncpg.Connection,
                                                                          dsn: str) -> None:
    """A job in progress under a worker that is registered but runs nothing answers no request."""
    await fleet.register(conn, "silent-worker-1", "host", 1, 1, ["t"], "0")
    [job_id] = await transitions.enqueue(conn, [JobCreate("t", {})])
    await conn.execute("UPDATE jobs SET status = 'in_progress', worker_id = 'silent-worker-1', attempts = 1, "
                       "started_at = now() WHERE id = $1", job_id)
    jobs = await service(dsn)
    try:
        with pytest.raises(WorkerNotAnswering) as refused:
            await jobs.job_stack(job_id, within=0.5)
    finally:
        await jobs.close()
    assert refused.value.worker_id == "silent-worker-1"
    assert str(refused.value) == f"worker silent-worker-1 did not answer within 0.5 s with the stack of job {job_id}"
    assert await conn.fetchval("SELECT count(*) FROM job_stack_requests") == 0
    assert await conn.fetchval("SELECT count(*) FROM job_stacks") == 0


async def test_asking_costs_the_worker_nothing_while_nobody_asks(conn: asyncpg.Connection, dsn: str) -> None:
    """No request, no answer: the worker takes and writes nothing; one request, one answer."""
    holds = AsyncHold()
    [job_id] = await transitions.enqueue(conn, [JobCreate("hold", {})])
    worker = RunningWorker(dsn, {"hold": holds}, JOB_HEARTBEAT_INTERVAL=0.1)
    jobs = await service(dsn)
    try:
        await wait_for(lambda: running(conn, job_id), what="the job to run")
        for _ in range(3):  # several heartbeats, each looking for requests
            await asyncio.sleep(0.2)
        before = worker.worker.stacks.answered
        await jobs.job_stack(job_id)
        after = worker.worker.stacks.answered
    finally:
        holds.release.set()
        await worker.stop()
        await jobs.close()
    assert (before, after) == (0, 1)


@pytest.mark.parametrize("executor", ["async", "thread", "process"])
async def test_behind_pgbouncer_in_transaction_mode(conn: asyncpg.Connection, dsn: str, pgbouncer: PgBouncer,
                                                    executor: str, tmp_path: Path) -> None:
    """The worker cannot LISTEN through the pooler: it finds the request with the query it makes
    for its running jobs' cancellations, and the asker polls for the answer."""
    pooled = pgbouncer.url(dsn, declared=False)
    release = tmp_path / "release"
    holds = {"async": AsyncHold(), "thread": ThreadHold(), "process": ProcessHold()}[executor]
    inner = {"async": "hold_async", "thread": "hold_in_thread", "process": "hold_in_process"}[executor]
    [job_id] = await transitions.enqueue(conn, [JobCreate("hold", {"release": str(release)})])
    worker = RunningWorker(pooled, {"hold": holds})
    jobs = await service(pooled)
    try:
        await wait_for(lambda: running(conn, job_id), what="the job to run")
        assert worker.worker.listening is not None and not worker.worker.listening.listening
        stack = await wait_for(lambda: stack_in(jobs, job_id, inner), what="the processor's code to run")
        _release(holds, release)
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the job to complete")
        kept = await jobs.job_stack(job_id)
    finally:
        _release(holds, release)
        await worker.stop()
        await jobs.close()
    assert stack.running and functions(stack)[:2] == ["process", inner]
    assert not kept.running and kept.frames == stack.frames


def _release(holds: object, release: Path) -> None:
    if isinstance(holds, (AsyncHold, ThreadHold)):
        holds.release.set()
    release.touch()


async def test_a_job_that_blocks_the_event_loop_is_answered_from_a_thread(conn: asyncpg.Connection, dsn: str,
                                                                          tmp_path: Path) -> None:
    """The worker's loop cannot answer while a processor blocks it: its blocked-loop thread does,
    with the stack down to the blocking call. A worker of its own, in a process: the test's loop
    stays free to ask."""
    started, release = tmp_path / "started", tmp_path / "release"
    [job_id] = await transitions.enqueue(conn, [JobCreate("block", {"started": str(started),
                                                                    "release": str(release)})])
    worker = start_worker(dsn, "--processors", "stack_processors", log_path=tmp_path / "worker.log")
    jobs = await service(dsn)
    try:
        await wait_for(lambda: asyncio.sleep(0, started.exists()), what="the job to block the loop")
        stack = await jobs.job_stack(job_id)
        release.touch()
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the job to complete")
    finally:
        release.touch()
        await jobs.close()
        await asyncio.to_thread(stop_workers, [worker])
    assert stack.running and functions(stack) == ["process", "block_the_loop"], stack.text()
    assert stack.frames[-1].source == "time.sleep(0.02)  # the worker's event loop is blocked here"
