"""The service every front door shares: reads, actions, user scoping, worker-command legality."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobdesk.api.server import connect_service
from jobdesk.core.errors import IllegalTransition, InvalidJob, JobNotFound
from jobdesk.core.models import JobCreate, Status
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from jobdesk.store import fleet, transitions
from jobdesk.store.jobs import JobFilter
from jobdesk.store.pipelines import PipelineFilter
from tests.helpers import seq_scans_of_jobs, set_autovacuum


@pytest.fixture
async def service(dsn: str) -> AsyncIterator[JobService]:
    jobs = await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), source="cli", pool_size=2)
    yield jobs
    await jobs.close()


async def add_user(conn: asyncpg.Connection, name: str) -> int:
    return await conn.fetchval("INSERT INTO users (name) VALUES ($1) RETURNING id", name)


async def test_job_detail_has_attempts_dependencies_and_dependants(service: JobService,
                                                                   conn: asyncpg.Connection) -> None:
    a, b = JobCreate("echo", {"n": 1}), JobCreate("echo", {"n": 2})
    c = JobCreate("echo", {"n": 3}, dependent_on_jobs=[a.id, b.id])
    d = JobCreate("echo", {"n": 4}, dependent_on_jobs=[c.id])
    await service.enqueue_many([a, b, c, d])
    await conn.execute("INSERT INTO job_attempts (job_id, attempt, outcome, error_message, traceback) "
                       "VALUES ($1, 1, 'failed', 'boom', 'Traceback ... boom')", c.id)
    detail = await service.job_detail(c.id)
    assert detail.job.id == c.id and detail.job.status == Status.QUEUED
    assert detail.dependencies == [a.id, b.id]
    assert detail.dependants == [d.id]
    assert [(x.attempt, x.outcome, x.error_message) for x in detail.attempts] == [(1, "failed", "boom")]
    assert detail.attempts[0].to_json()["finished_at"].endswith("+00:00")
    with pytest.raises(JobNotFound, match="no job with id nope"):
        await service.job_detail("nope")


async def test_pages_counts_and_rows_go_through_the_service(service: JobService) -> None:
    ids = [await service.enqueue("echo", {"n": i}) for i in range(5)]
    first = await service.job_page(JobFilter(), limit=3)
    assert [r.id for r in first.rows] == ids[::-1][:3] and first.has_more
    rest = await service.job_page(JobFilter(), after=first.rows[-1].keyset("created"), limit=3)
    assert [r.id for r in rest.rows] == ids[::-1][3:] and not rest.has_more
    counts = await service.status_counts(JobFilter())
    assert counts.counts[Status.QUEUED] == 5 and counts.exact(Status.QUEUED)
    await service.cancel(ids[:2])
    assert {r.id: r.status for r in await service.job_rows(ids[:3])} == {
        ids[0]: Status.CANCELLED, ids[1]: Status.CANCELLED, ids[2]: Status.QUEUED}


async def test_pipeline_reads_and_retry(service: JobService, conn: asyncpg.Connection) -> None:
    a = JobCreate("echo", {"name": "nightly"})
    b = JobCreate("echo", {}, dependent_on_jobs=[a.id])
    pid = await service.create_pipeline([a, b])
    rows, more = await service.pipelines(PipelineFilter())
    assert [(r.pipeline_id, r.name, r.total) for r in rows] == [(pid, "nightly", 2)] and not more
    nodes, truncated = await service.pipeline_graph(pid)
    assert [n.id for n in nodes] == [a.id, b.id] and nodes[1].depends_on == [a.id] and not truncated
    assert await service.retry_pipeline(pid) == []
    await conn.execute("UPDATE jobs SET status = 'failed' WHERE id = $1", a.id)
    await service.cancel([b.id])
    assert await service.retryable_in(pid) == [a.id, b.id]
    assert sorted(await service.retry_pipeline(pid)) == sorted([a.id, b.id])
    changed, current = await service.pipeline_changes({a.id}, PipelineFilter())
    assert changed == {pid} and current[0].queued == 2


async def test_a_user_bound_service_sees_and_acts_on_its_own_jobs_only(service: JobService,
                                                                       conn: asyncpg.Connection) -> None:
    alice, bob = await add_user(conn, "alice"), await add_user(conn, "bob")
    as_alice = service.as_actor(transitions.Actor("api", "alice-token"), user_id=alice)
    as_bob = service.as_actor(transitions.Actor("api", "bob-token"), user_id=bob)
    mine = await as_alice.enqueue("echo", {}, user_id=bob)  # the body cannot choose another user
    assert (await service.get_job(mine)).user_id == alice
    theirs = await as_bob.enqueue("echo", {})
    with pytest.raises(JobNotFound, match=f"no job with id {theirs}"):
        await as_alice.get_job(theirs)
    with pytest.raises(JobNotFound, match=f"no job with id {theirs}"):
        await as_alice.cancel([theirs])
    with pytest.raises(JobNotFound):  # nor depend on it
        await as_alice.enqueue("echo", {}, depends_on=[theirs])
    assert [r.id for r in (await as_alice.job_page(JobFilter())).rows] == [mine]
    assert (await as_alice.job_page(JobFilter(user_id=bob))).rows == []
    assert [r.id for r in await as_alice.job_rows([mine, theirs])] == [mine]
    assert (await as_alice.status_counts(JobFilter())).counts[Status.QUEUED] == 1
    assert await as_alice.cancel([mine]) == [mine]
    assert await service.get_job(theirs)  # the operator's service still sees everything
    first = JobCreate("echo", {})
    batch = [first, *(JobCreate("echo", {}, dependent_on_jobs=[first.id]) for _ in range(300))]
    with pytest.raises(JobNotFound, match=f"no job with id {theirs}"):  # nor in a batch
        await as_alice.enqueue_many([*batch, JobCreate("echo", {}, dependent_on_jobs=[first.id, theirs])])
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id = $1", first.id) == 0
    assert await as_alice.enqueue_many(batch) == [j.id for j in batch]  # a parent inside the batch is its own


async def test_worker_commands_follow_the_table(service: JobService, conn: asyncpg.Connection) -> None:
    await fleet.register(conn, "w1", "host", 1, 2, ["echo"], "0.1.0")
    with pytest.raises(IllegalTransition, match="cannot resume worker w1: it is running; resume applies to paused"):
        await service.worker_command("w1", "resume")
    record = await service.worker_command("w1", "pause")
    assert record.requested == "pause"
    await fleet.set_state(conn, "w1", "paused")
    assert (await service.worker_command("w1", "resume")).requested == "resume"
    with pytest.raises(JobNotFound, match="no worker with id w2"):
        await service.worker_command("w2", "stop")
    view = await service.workers_view(30, with_unserved=True)
    assert [w.id for w in view.workers] == ["w1"] and view.served == frozenset({"echo"})
    assert view.unserved == []


async def test_a_group_commit_answers_each_caller_and_audits_each_submitter(service: JobService,
                                                                            conn: asyncpg.Connection) -> None:
    """`enqueue_batch` (POST /api/jobs under load): one statement inserts the jobs of several
    callers, audits each submitter's, and answers each with its job as it was stored; a job the
    database refuses fails its own caller only."""
    from datetime import UTC, datetime, timedelta

    from jobdesk.api.render import job_json
    from jobdesk.core.errors import InvalidJob

    ann, bob = transitions.Actor("api", None, "ann"), transitions.Actor("api", None, "bob")
    [parent] = await service.enqueue_many([JobCreate("t", {})])
    later = datetime.now(UTC) + timedelta(hours=1)
    entries = [(ann, JobCreate("t", {"n": 1})), (bob, JobCreate("t", {}, scheduled_at=later, priority=2)),
               (ann, JobCreate("t", {}, dependent_on_jobs=[parent], pipeline_id="p1"))]
    placed = await service.enqueue_batch(entries)
    assert [p.id for p in placed] == [job.id for _, job in entries]  # type: ignore[union-attr]
    for answer in placed:
        assert not isinstance(answer, InvalidJob) and not answer.duplicate
        stored = job_json(await service.get_job(answer.id))
        assert json.loads(answer.document) == stored and list(json.loads(answer.document)) == list(stored)
    audits = await conn.fetch("SELECT actor, job_ids FROM audit_log WHERE action = 'submit' ORDER BY actor")
    assert [(r["actor"], sorted(r["job_ids"])) for r in audits] == [
        ("ann", sorted([entries[0][1].id, entries[2][1].id])), ("bob", [entries[1][1].id])]

    bad = [(ann, JobCreate("t", {})), (bob, JobCreate("t", {}, dependent_on_jobs=["no-such-job"]))]
    good, refused = await service.enqueue_batch(bad)
    assert isinstance(refused, InvalidJob) and "no-such-job" in str(refused)
    assert not isinstance(good, InvalidJob) and await service.get_job(good.id)
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id = $1", bad[1][1].id) == 0


async def test_lookups_keep_to_the_indexes_as_the_table_grows(conn: asyncpg.Connection, dsn: str) -> None:
    """Statements a session prepared while `jobs` was small kept the plan made then, a read of
    every row, until an ANALYZE (autovacuum off here): at 300,000 rows the console's detail of
    a job with dependants took 40 ms, an enqueue with a dependency 150. The console's service
    plans each call, and the insert triggers (which also run in a backend's own sessions) keep
    to the primary key."""
    await set_autovacuum(conn, False)
    await conn.execute("SET enable_seqscan = off")  # this test's own reads
    # One connection, so that each statement surely passes the calls after which PostgreSQL may
    # keep one plan for it (5); with more, the calls spread over connections as the pool likes.
    console = await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), source="console",
                                       pool_size=1, plan_each_call=True)
    backend = await asyncpg.connect(dsn)  # a backend enqueueing by plain SQL on its own connection
    [parent] = await console.enqueue_many([JobCreate("t", {})])

    async def calls() -> None:
        for _ in range(8):
            await console.enqueue_many([JobCreate("t", {}, dependent_on_jobs=[parent])])
            await console.job_detail(parent)  # the detail pane: dependants listed
            await backend.execute("INSERT INTO jobs (type, input_data, dependent_on_jobs) "
                                  "VALUES ('t', '{}', jsonb_build_array($1::text))", parent)

    try:
        await calls()  # PostgreSQL keeps one plan after 5 calls, where it may
        await conn.execute("INSERT INTO jobs (type, user_id, input_data, status) "
                           "SELECT 'old', 1, '{}', 'completed' FROM generate_series(1, 50000)")
        before = await seq_scans_of_jobs(conn, console.pool, backend)
        await calls()
        assert await seq_scans_of_jobs(conn, console.pool, backend) == before
        assert len((await console.job_detail(parent)).dependants) == 32
    finally:
        await backend.close()
        await console.close()


async def test_the_apis_kept_plans_keep_to_the_indexes_as_the_table_grows(conn: asyncpg.Connection,
                                                                         dsn: str) -> None:
    """The HTTP API keeps its plans across calls (planning its group commit each call cost a
    third more per batch), so a plan made while `jobs` was small stayed a read of the whole table
    until an ANALYZE (autovacuum off here): at 300,000 rows a job's detail took 49 ms instead of
    1, a pipeline's steps 113, an enqueue with a dependency outside its batch 33. Its service
    keeps its plans on the indexes."""
    await set_autovacuum(conn, False)
    await conn.execute("SET enable_seqscan = off")  # this test's own reads
    api = await connect_service(load_settings(DATABASE_URL=dsn), pool_size=1)  # see the test above
    actor = transitions.Actor("api", None, "token-a")
    [parent] = await api.enqueue_many([JobCreate("t", {})])
    pipeline = await api.create_pipeline([JobCreate("a", {}, id="pa"),
                                          JobCreate("b", {}, id="pb", dependent_on_jobs=["pa"])])

    async def calls() -> None:
        for _ in range(8):
            [placed] = await api.enqueue_batch([(actor, JobCreate("t", {}, dependent_on_jobs=[parent]))])
            assert not isinstance(placed, InvalidJob)
            await api.job_detail(parent)  # an action's answer: dependants listed
            await api.pipeline_steps(pipeline)

    try:
        await calls()  # PostgreSQL keeps one plan after 5 calls, where it may
        await conn.execute("INSERT INTO jobs (type, input_data, status) "
                           "SELECT 'old', '{}', 'completed' FROM generate_series(1, 50000)")
        before = await seq_scans_of_jobs(conn, api.pool)
        await calls()
        assert await seq_scans_of_jobs(conn, api.pool) == before
        assert len((await api.job_detail(parent)).dependants) == 16
        assert [step.id for step in (await api.pipeline_steps(pipeline)).steps] == ["pa", "pb"]
    finally:
        await api.close()
