"""`jobdesk stack JOB_ID [--json]` against a real PostgreSQL and a real worker: a running job's
stack, the stack kept after it ended, and one line and exit 1 for each refusal."""

from __future__ import annotations

import asyncio
import json

import asyncpg

from jobdesk.core.models import JobCreate
from jobdesk.store import fleet, transitions
from tests.helpers import RunningWorker, run_cli, wait_for
from tests.stack_processors import AsyncHold


async def stack_cli(dsn: str, *args: str) -> tuple[int, str, str]:
    """`jobdesk stack ARGS` in a thread, so that the worker in this loop answers meanwhile."""
    done = await asyncio.to_thread(run_cli, "stack", *args, dsn=dsn)
    return done.returncode, done.stdout, done.stderr


async def test_stack_of_a_running_job_then_the_one_kept_after_it_ended(conn: asyncpg.Connection, dsn: str) -> None:
    holds = AsyncHold()
    [job_id] = await transitions.enqueue(conn, [JobCreate("hold", {})])
    worker = RunningWorker(dsn, {"hold": holds})
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs WHERE id = $1", job_id),
                       what="the job to run")
        code, out, err = await stack_cli(dsn, job_id)
        assert (code, err) == (0, ""), err
        code, as_json, err = await stack_cli(dsn, job_id, "--json")
        assert code == 0, err
        holds.release.set()
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the job to complete")
    finally:
        holds.release.set()
        await worker.stop()
    lines = out.splitlines()
    assert lines[0].startswith(f"Stack of job {job_id}, attempt 1 on worker {worker.worker.worker_id}, taken ")
    assert lines[0].endswith("(most recent call last):")
    # As a traceback prints it: outermost first, the innermost last, each with its source line.
    assert lines[1].startswith('  File "') and lines[1].endswith(", in process")
    assert lines[3].endswith(", in hold_async")
    assert lines[4] == "    await self.release.wait()  # the async job waits here"
    answer = json.loads(as_json)
    assert answer["running"] is True and answer["status"] == "in_progress" and answer["attempt"] == 1
    assert [f["function"] for f in answer["frames"]][:2] == ["process", "hold_async"]
    assert set(answer["frames"][0]) == {"file", "line", "function", "source"}

    code, after, err = await stack_cli(dsn, job_id)
    assert (code, err) == (0, "")
    head, *frames = after.splitlines()
    assert head.startswith(f"Stack of job {job_id}, attempt 1 on worker {worker.worker.worker_id}, taken ")
    assert head.endswith("; the job has ended since (completed):")
    assert frames == lines[1:]  # the last stack taken, as it was


async def test_a_job_not_running_and_never_asked_is_one_line(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("t", {})])
    await conn.execute("UPDATE jobs SET status = 'completed', completed_at = now() WHERE id = $1", job_id)
    code, out, err = await stack_cli(dsn, job_id)
    assert (code, out) == (1, "")
    assert err == f"jobdesk: error: job {job_id} is not running (completed)\n"
    code, out, err = await stack_cli(dsn, "no-such-job")
    assert (code, out) == (1, "")
    assert err == "jobdesk: error: no job with id no-such-job\n"
    assert await conn.fetchval("SELECT count(*) FROM job_stack_requests") == 0
    assert await conn.fetchval("SELECT count(*) FROM job_stacks") == 0


async def test_a_worker_that_does_not_answer_within_5_s_is_named(conn: asyncpg.Connection, dsn: str) -> None:
    await fleet.register(conn, "stuck-host-42", "stuck-host", 42, 1, ["t"], "0")
    [job_id] = await transitions.enqueue(conn, [JobCreate("t", {})])
    await conn.execute("UPDATE jobs SET status = 'in_progress', worker_id = 'stuck-host-42', attempts = 1, "
                       "started_at = now() WHERE id = $1", job_id)
    code, out, err = await stack_cli(dsn, job_id)
    assert (code, out) == (1, "")
    assert err == f"jobdesk: error: worker stuck-host-42 did not answer within 5 s with the stack of job {job_id}\n"
    assert await conn.fetchval("SELECT count(*) FROM job_stack_requests") == 0
    assert await conn.fetchval("SELECT count(*) FROM job_stacks") == 0
