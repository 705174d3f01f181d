"""Waiting for jobs from Python: `JobClient.wait`, `wait_many` and `run`, over the client's one
LISTEN, and by polling behind a transaction pooler."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from jobdesk import JobClient, JobNotFound, JobWaitTimeout, Status
from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.settings import load_settings
from jobdesk.processors.builtin import EchoProcessor, SleepProcessor
from jobdesk.service import waiting
from jobdesk.store.listen_supervisor import Cause
from tests.helpers import RunningWorker, wait_for
from tests.pgbouncer import PgBouncer


class Failing(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        raise RuntimeError(f"attempt {job.attempt} fails")


class NeedsApproval(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({"draft": True}, requires_approval=True)


PROCESSORS = {"echo": EchoProcessor(), "sleep": SleepProcessor(), "boom": Failing(), "hold": NeedsApproval()}


@pytest.fixture
async def client(dsn: str) -> AsyncIterator[JobClient]:
    jobs = await JobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2)
    yield jobs
    await jobs.close()


@pytest.fixture
async def worker(dsn: str) -> AsyncIterator[RunningWorker]:
    running = RunningWorker(dsn, PROCESSORS)
    yield running
    await running.stop()


async def test_wait_returns_the_completed_job(client: JobClient, worker: RunningWorker) -> None:
    job_id = await client.enqueue("echo", {"hello": "world"})
    record = await client.wait(job_id, timeout=30)
    assert record.id == job_id and record.status == Status.COMPLETED
    assert record.result_data == {"hello": "world"}


async def test_wait_returns_a_job_failed_after_its_retries(client: JobClient, worker: RunningWorker) -> None:
    record = await client.wait(await client.enqueue("boom", {}), timeout=30)
    assert record.status == Status.FAILED
    assert record.retry_count == 3 and "attempt 4 fails" in (record.error_message or "")


async def test_wait_returns_a_cancelled_job(client: JobClient, worker: RunningWorker) -> None:
    job_id = await client.enqueue("sleep", {"seconds": 30})
    await wait_for(lambda: _status_is(client, job_id, Status.IN_PROGRESS), what="the job to start")
    waiter = asyncio.create_task(client.wait(job_id, timeout=30))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    assert await client.cancel([job_id]) == [job_id]
    assert (await waiter).status == Status.CANCELLED


async def test_wait_ends_at_approval_and_again_at_rejection(client: JobClient, worker: RunningWorker) -> None:
    job_id = await client.enqueue("hold", {})
    held = await client.wait(job_id, timeout=30)
    assert held.status == Status.WAITING_APPROVAL and held.result_data == {"draft": True}
    waiter = asyncio.create_task(client.wait(job_id, timeout=30))
    await asyncio.sleep(0.2)  # a job waiting for approval ends a wait at once
    assert waiter.done() and waiter.result().status == Status.WAITING_APPROVAL
    await client.reject([job_id], "not today")
    rejected = await client.wait(job_id, timeout=30)
    assert rejected.status == Status.FAILED and rejected.error_message == "rejected: not today"


async def test_a_wait_that_times_out_names_the_job_and_its_status(client: JobClient) -> None:
    job_id = await client.enqueue("echo", {})  # no worker: it stays queued
    started = time.monotonic()
    with pytest.raises(JobWaitTimeout, match=f"job {job_id} did not finish within 0.5 s: it is queued") as caught:
        await client.wait(job_id, timeout=0.5)
    assert 0.4 < time.monotonic() - started < 5
    assert caught.value.statuses == {job_id: "queued"}
    assert isinstance(caught.value, TimeoutError)


async def test_an_unknown_job_is_not_found(client: JobClient) -> None:
    with pytest.raises(JobNotFound, match="no job with id nope"):
        await client.wait("nope", timeout=1)
    known = await client.enqueue("echo", {})
    with pytest.raises(JobNotFound, match="no jobs with ids nope, nada"):
        await client.wait_many([known, "nope", "nada"], timeout=1)


async def test_wait_many_returns_the_records_in_the_order_asked(client: JobClient, worker: RunningWorker) -> None:
    ids = [await client.enqueue("echo", {"n": n}) for n in range(5)]
    ids.append(await client.enqueue("boom", {}))
    asked = ids[::-1] + [ids[0]]
    records = await client.wait_many(asked, timeout=30)
    assert [r.id for r in records] == asked
    assert [r.status for r in records] == [Status.FAILED] + [Status.COMPLETED] * 6
    assert await client.wait_many([], timeout=1) == []


async def test_wait_many_timing_out_names_the_jobs_not_done(client: JobClient) -> None:
    ids = [await client.enqueue("echo", {"n": n}) for n in range(2)]
    await client.cancel([ids[0]])
    waiting_on = [*ids, await client.enqueue("echo", {})]
    with pytest.raises(JobWaitTimeout, match=f"2 of 3 jobs did not finish within 0.3 s: {ids[1]} \\(queued\\), "
                                             f"{waiting_on[2]} \\(queued\\)") as caught:
        await client.wait_many(waiting_on, timeout=0.3)
    assert set(caught.value.statuses) == {ids[1], waiting_on[2]}


async def test_run_enqueues_and_waits(client: JobClient, worker: RunningWorker) -> None:
    record = await client.run("echo", {"n": 7}, timeout=30, priority=3)
    assert record.status == Status.COMPLETED and record.result_data == {"n": 7} and record.priority == 3


async def test_waits_share_one_listen_connection_and_read_only_when_told(client: JobClient,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """While listening, a wait reads its job once, then only when a notification names it (or
    at the safety re-read, every 5 s): a job left queued 1.5 s is read once per wait."""
    reads: list[list[str]] = []
    read = client._read_waited

    async def counted(job_ids: list[str]) -> object:
        reads.append(list(job_ids))
        return await read(job_ids)

    monkeypatch.setattr(client, "_read_waited", counted)
    queued, other = await client.enqueue("echo", {}), await client.enqueue("echo", {})
    waits = [asyncio.create_task(client.wait(queued, timeout=1.5)) for _ in range(3)]
    await asyncio.sleep(0.5)
    await client.cancel([other])  # a change to another job wakes none of them
    for task in waits:
        with pytest.raises(JobWaitTimeout):
            await task
    watch = client._watch
    assert watch is not None and watch.listening
    assert waiting.SAFETY_REREAD_S > 1.5
    assert len(reads) <= 3 * 2, reads  # per wait: the first read, and the one at its timeout
    assert all(ids == [queued] for ids in reads)
    # The change of a job waited on is read at once.
    waiter = asyncio.create_task(client.wait(queued, timeout=30))
    await asyncio.sleep(0.2)
    before = len(reads)
    await client.cancel([queued])
    assert (await waiter).status == Status.CANCELLED
    assert len(reads) == before + 1
    assert client._watch is watch  # the same listen connection for every wait


async def test_behind_a_pooler_without_a_listen_url_a_wait_polls(dsn: str, pgbouncer: PgBouncer) -> None:
    pooled = pgbouncer.url(dsn, declared=False)
    settings = load_settings(DATABASE_URL=pooled, DATABASE_LISTEN_URL="")
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        async with await JobClient.connect(pooled, settings=settings, pool_size=2) as client:
            record = await client.run("echo", {"through": "the pooler"}, timeout=30)
            assert record.status == Status.COMPLETED and record.result_data == {"through": "the pooler"}
            watch = client._watch
            assert watch is not None and not watch.listening
            assert watch.polling is not None and watch.polling.cause is Cause.NO_LISTEN
            job_id = await client.enqueue("sleep", {"seconds": 0.3})
            assert (await client.wait(job_id, timeout=30)).status == Status.COMPLETED
    finally:
        await worker.stop()


async def _status_is(client: JobClient, job_id: str, status: Status) -> bool:
    return (await client.get_job(job_id)).status == status
