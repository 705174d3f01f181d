"""OpenTelemetry traces on a real PostgreSQL and a worker in this process, exported to the SDK's
in-memory exporter: the enqueuer's trace goes on into the job's runs, its next jobs, its durable
children and its pipeline's next stages; each attempt is a `jobdesk.run` span with the job's
attributes, an error sets ERROR, and each durable step is a child span of its run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jobdesk import BaseProcessor, Job, JobClient, JobCreate, ProcessorResult
from tests.durable_processors import PROCESSOR_MAP as DURABLE
from tests.helpers import RunningWorker, wait_for
from tests.otel_spans import of_job, parent_id
from tests.pgbouncer import PgBouncer

SEEN: dict[str, int] = {}  # job id -> the span id current while its processor ran


class Ok(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        SEEN[job.id] = trace.get_current_span().get_span_context().span_id
        return ProcessorResult({"ok": True})


class Fails(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        raise ValueError(f"boom on attempt {job.attempt}")


class WithNext(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({}, next_jobs=[JobCreate("trace.ok", {"from": job.id})])


class HeldWithNext(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({}, next_jobs=[JobCreate("trace.ok", {"from": job.id})], requires_approval=True)


PROCESSORS: dict[str, BaseProcessor] = {"trace.ok": Ok(), "trace.fails": Fails(), "trace.next": WithNext(),
                                        "trace.held": HeldWithNext(),
                                        **{name: cls() for name, cls in DURABLE.items()}}


@pytest.fixture
async def client(dsn: str) -> AsyncIterator[JobClient]:
    async with await JobClient.connect(dsn, pool_size=2) as jobs:
        yield jobs


async def ended(conn: asyncpg.Connection, *ids: str, status: str = "completed") -> bool:
    n = await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = $2", list(ids), status)
    return n == len(ids)


async def run_until(dsn: str, conn: asyncpg.Connection, *ids: str, status: str = "completed",
                    **settings: Any) -> None:
    worker = RunningWorker(dsn, PROCESSORS, **settings)
    try:
        await wait_for(lambda: ended(conn, *ids, status=status), what=f"jobs {status}")
    finally:
        await worker.stop()


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_job_enqueued_in_a_span_runs_in_its_trace(spans: InMemorySpanExporter, client: JobClient,
                                                          conn: asyncpg.Connection, dsn: str) -> None:
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as request:
        job_id = await client.enqueue("trace.ok", {"n": 1})
    stored = await conn.fetchval("SELECT trace_context FROM jobs WHERE id = $1", job_id)
    assert stored["traceparent"].split("-")[1] == f"{request.get_span_context().trace_id:032x}"
    await run_until(dsn, conn, job_id)

    finished = spans.get_finished_spans()
    [enqueue] = of_job(finished, "jobdesk.enqueue", job_id)
    [run] = of_job(finished, "jobdesk.run", job_id)
    trace_id = request.get_span_context().trace_id
    assert enqueue.context.trace_id == run.context.trace_id == trace_id
    assert parent_id(enqueue) == request.get_span_context().span_id
    assert parent_id(run) == enqueue.context.span_id  # the stored context is the enqueue span's
    assert enqueue.kind == SpanKind.PRODUCER and run.kind == SpanKind.CONSUMER
    assert attrs(enqueue) == {"messaging.system": "jobdesk", "messaging.operation.type": "create",
                              "messaging.destination.name": "trace.ok", "messaging.message.id": job_id,
                              "jobdesk.job.id": job_id, "jobdesk.job.type": "trace.ok"}
    assert attrs(run) == {"messaging.system": "jobdesk", "messaging.operation.type": "process",
                          "messaging.destination.name": "trace.ok", "messaging.message.id": job_id,
                          "jobdesk.job.id": job_id, "jobdesk.job.type": "trace.ok", "jobdesk.job.attempt": 1,
                          "jobdesk.job.status": "completed"}
    assert run.status.status_code == StatusCode.UNSET
    assert SEEN[job_id] == run.context.span_id, "the run span is current while the processor runs"


async def test_a_failed_attempt_is_an_error_span_and_each_attempt_has_its_own(
        spans: InMemorySpanExporter, client: JobClient, conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await client.enqueue("trace.fails", {})
    await run_until(dsn, conn, job_id, status="failed", JOB_RETRY_INTERVALS=[0.05])

    finished = spans.get_finished_spans()
    [enqueue] = of_job(finished, "jobdesk.enqueue", job_id)
    runs = of_job(finished, "jobdesk.run", job_id)
    assert [attrs(r)["jobdesk.job.attempt"] for r in runs] == [1, 2]
    assert [attrs(r)["jobdesk.job.status"] for r in runs] == ["queued", "failed"]  # a retry, then for good
    for attempt, run in enumerate(runs, 1):
        assert run.status.status_code == StatusCode.ERROR
        assert run.status.description == f"ValueError: boom on attempt {attempt}"
        [event] = run.events
        assert event.name == "exception"
        assert dict(event.attributes or {})["exception.type"] == "ValueError"
        assert parent_id(run) == enqueue.context.span_id
        assert run.context.trace_id == enqueue.context.trace_id


async def test_durable_steps_are_child_spans_of_their_run(spans: InMemorySpanExporter, client: JobClient,
                                                          conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("CREATE TABLE step_calls (job_id text, step text, at timestamptz DEFAULT clock_timestamp())")
    job_id = await client.enqueue("durable.three_steps", {"dsn": dsn})
    await run_until(dsn, conn, job_id)

    finished = spans.get_finished_spans()
    [run] = of_job(finished, "jobdesk.run", job_id)
    steps = of_job(finished, "jobdesk.step", job_id)
    assert [attrs(s)["jobdesk.step.name"] for s in steps] == ["one", "two", "three"]
    assert all(parent_id(s) == run.context.span_id and s.context.trace_id == run.context.trace_id for s in steps)
    assert all(attrs(s)["jobdesk.step.replayed"] is False for s in steps)
    assert all(attrs(s)["messaging.operation.type"] == "process" for s in steps)


async def test_a_step_that_raises_is_an_error_span_and_is_replayed_on_the_rerun(
        spans: InMemorySpanExporter, client: JobClient, conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("CREATE TABLE step_calls (job_id text, step text, at timestamptz DEFAULT clock_timestamp())")
    job_id = await client.enqueue("durable.fails_once", {"dsn": dsn})
    await run_until(dsn, conn, job_id)

    finished = spans.get_finished_spans()
    runs = of_job(finished, "jobdesk.run", job_id)
    assert len(runs) == 2
    steps = of_job(finished, "jobdesk.step", job_id)
    by_run = {r.context.span_id: [s for s in steps if parent_id(s) == r.context.span_id] for r in runs}
    first, second = (by_run[r.context.span_id] for r in runs)
    assert first[-1].status.status_code == StatusCode.ERROR  # the step that raised, in the failed attempt
    assert [attrs(s)["jobdesk.step.replayed"] for s in second][0] is True  # stored by the first run
    assert runs[0].status.status_code == StatusCode.ERROR and runs[1].status.status_code == StatusCode.UNSET


async def test_next_jobs_and_durable_children_continue_the_trace(spans: InMemorySpanExporter, client: JobClient,
                                                                 conn: asyncpg.Connection, dsn: str) -> None:
    parent_id_ = await client.enqueue("trace.next", {})
    durable_parent = await client.enqueue("durable.parent", {})
    worker = RunningWorker(dsn, PROCESSORS)
    try:  # the durable parent ends once its three children have (the second fails on purpose)
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 6 FROM jobs WHERE status IN ('completed', 'failed')"),
                       what="the parents, their next job and the children")
    finally:
        await worker.stop()
    children = [r["id"] for r in await conn.fetch("SELECT id FROM jobs WHERE spawned_by = $1", durable_parent)]
    [next_id] = [r["id"] for r in await conn.fetch("SELECT id FROM jobs WHERE type = 'trace.ok'")]

    finished = spans.get_finished_spans()
    [parent_run] = of_job(finished, "jobdesk.run", parent_id_)
    [next_run] = of_job(finished, "jobdesk.run", next_id)
    assert parent_id(next_run) == parent_run.context.span_id, "a next job's run is a child of its creator's run"
    assert next_run.context.trace_id == parent_run.context.trace_id

    first_run = of_job(finished, "jobdesk.run", durable_parent)[0]  # it spawns, then waits (a second run)
    assert len(children) == 3
    for child in children:
        [child_run] = of_job(finished, "jobdesk.run", child)
        assert parent_id(child_run) == first_run.context.span_id
        assert child_run.context.trace_id == first_run.context.trace_id


async def test_next_jobs_held_for_approval_keep_the_trace_until_approved(
        spans: InMemorySpanExporter, client: JobClient, conn: asyncpg.Connection, dsn: str) -> None:
    held = await client.enqueue("trace.held", {})
    await run_until(dsn, conn, held, status="waiting_approval")
    await client.approve([held])
    next_id = await conn.fetchval("SELECT id FROM jobs WHERE type = 'trace.ok'")
    await run_until(dsn, conn, next_id)

    finished = spans.get_finished_spans()
    [held_run] = of_job(finished, "jobdesk.run", held)
    [next_run] = of_job(finished, "jobdesk.run", next_id)
    assert attrs(held_run)["jobdesk.job.status"] == "waiting_approval"
    assert parent_id(next_run) == held_run.context.span_id
    assert next_run.context.trace_id == held_run.context.trace_id


async def test_a_pipeline_s_stages_run_in_the_trace_of_its_enqueue(spans: InMemorySpanExporter, client: JobClient,
                                                                   conn: asyncpg.Connection, dsn: str) -> None:
    first = JobCreate("trace.ok", {"stage": 1})
    second = JobCreate("trace.ok", {"stage": 2}, dependent_on_jobs=[first.id])
    with trace.get_tracer("test").start_as_current_span("nightly"):
        await client.create_pipeline([first, second])
    await run_until(dsn, conn, first.id, second.id)

    finished = spans.get_finished_spans()
    [enqueue] = [s for s in finished if s.name == "jobdesk.enqueue"]
    assert attrs(enqueue)["messaging.batch.message_count"] == 2
    for job_id in (first.id, second.id):
        [run] = of_job(finished, "jobdesk.run", job_id)
        assert parent_id(run) == enqueue.context.span_id
        assert run.context.trace_id == enqueue.context.trace_id


async def test_the_trace_goes_through_pgbouncer_in_transaction_mode(spans: InMemorySpanExporter, pgbouncer: PgBouncer,
                                                                    conn: asyncpg.Connection, dsn: str) -> None:
    pooled = pgbouncer.url(dsn, declared=False)
    with trace.get_tracer("test").start_as_current_span("request") as request:
        async with await JobClient.connect(pooled, pool_size=2) as jobs:
            job_id = await jobs.enqueue("trace.ok", {})
    await run_until(pooled, conn, job_id)
    [run] = of_job(spans.get_finished_spans(), "jobdesk.run", job_id)
    assert run.context.trace_id == request.get_span_context().trace_id


async def test_a_large_batch_carries_the_trace_of_its_enqueue(spans: InMemorySpanExporter, client: JobClient,
                                                              conn: asyncpg.Connection, dsn: str) -> None:
    """A batch large enough for COPY stores every job's trace context, the batch's enqueue span's."""
    from jobdesk.store.transitions.copy_in import COPY_MIN_JOBS

    with trace.get_tracer("test").start_as_current_span("request") as request:
        ids = await client.enqueue_many([JobCreate("trace.ok", {"n": i}) for i in range(COPY_MIN_JOBS)])
    [enqueue] = [s for s in spans.get_finished_spans() if s.name == "jobdesk.enqueue"]
    assert attrs(enqueue)["messaging.batch.message_count"] == COPY_MIN_JOBS
    stored = await conn.fetch("SELECT trace_context FROM jobs WHERE id = ANY($1::text[])", ids)
    assert len(stored) == COPY_MIN_JOBS
    assert {r["trace_context"]["traceparent"].rsplit("-", 1)[0] for r in stored} == {
        f"00-{request.get_span_context().trace_id:032x}-{enqueue.context.span_id:016x}"}
    await run_until(dsn, conn, ids[0], ids[-1])
    [run] = of_job(spans.get_finished_spans(), "jobdesk.run", ids[-1])
    assert parent_id(run) == enqueue.context.span_id
