"""The statements behind running jobs' stacks: a worker takes the requests for the jobs it holds
and leaves the others (a job whose claim it has not read yet) to its next look; an asker's
request forgotten long ago is dropped; a deleted job takes its stack and requests along."""

from __future__ import annotations

import asyncpg

from jobdesk.core.job_stack import StackFrame
from jobdesk.core.models import JobCreate
from jobdesk.store import job_stacks, transitions


async def test_a_worker_takes_the_requests_of_the_jobs_it_holds(conn: asyncpg.Connection) -> None:
    held, claiming, old = await transitions.enqueue(conn, [JobCreate("t", {}) for _ in range(3)])
    for job_id in (held, claiming, old):
        await job_stacks.ask(conn, job_id, "w1")
    await job_stacks.ask(conn, held, "w2")  # another worker's request stays
    await conn.execute("UPDATE job_stack_requests SET asked_at = now() - interval '1 minute' WHERE job_id = $1", old)

    taken, waiting = await job_stacks.take_requests(conn, "w1", [held])
    assert (taken, waiting) == ([held], True)
    left = await conn.fetch("SELECT job_id, worker_id FROM job_stack_requests ORDER BY worker_id")
    assert [(r["job_id"], r["worker_id"]) for r in left] == [(claiming, "w1"), (held, "w2")]
    assert await job_stacks.running_news(conn, "w1", [held]) == ([], True)

    taken, waiting = await job_stacks.take_requests(conn, "w1", [held, claiming])  # the claim is read now
    assert (taken, waiting) == ([claiming], False)
    assert await job_stacks.running_news(conn, "w1", [held]) == ([], False)


async def test_a_deleted_job_takes_its_stack_and_requests_along(conn: asyncpg.Connection) -> None:
    gone, kept = await transitions.enqueue(conn, [JobCreate("t", {}) for _ in range(2)])
    frames = [StackFrame("/app/x.py", 3, "process", "await thing()")]
    await job_stacks.keep(conn, "w1", [(gone, 1, frames), (kept, 1, frames)])
    await job_stacks.ask(conn, gone, "w1")
    await conn.execute("DELETE FROM jobs WHERE id = $1", gone)
    assert [r["job_id"] for r in await conn.fetch("SELECT job_id FROM job_stacks")] == [kept]
    assert await conn.fetchval("SELECT count(*) FROM job_stack_requests") == 0
    state = await job_stacks.job_state(conn, kept)
    assert state is not None and state.kept is not None and state.kept.frames == frames
    await conn.execute("TRUNCATE jobs CASCADE")
    assert await conn.fetchval("SELECT count(*) FROM job_stacks") == 0
