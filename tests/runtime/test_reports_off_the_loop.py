"""Progress and log lines from where the processors run: a plain def's thread and a separate
process report through the same names as async code, and every line of a traced run carries its
trace and span ids (whether from `logging` or from `job.log`)."""

from __future__ import annotations

import logging
import os

import asyncpg
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobdesk import BaseProcessor, Job, JobClient, ProcessorResult, SyncProcessor
from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from tests.helpers import RunningWorker, wait_for
from tests.otel_spans import spans  # noqa: F401 - the fixture
from tests.runtime import offloop_processors as procs


async def _done(conn: asyncpg.Connection, job_id: str) -> bool:
    return await conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id)


async def _run(conn: asyncpg.Connection, dsn: str, job_type: str, processor: BaseProcessor | SyncProcessor) -> str:
    [job_id] = await transitions.enqueue(conn, [JobCreate(job_type, {})])
    worker = RunningWorker(dsn, {job_type: processor})
    try:
        await wait_for(lambda: _done(conn, job_id), what=f"the {job_type} job to complete")
    finally:
        await worker.stop()
    return job_id


async def _lines(conn: asyncpg.Connection, job_id: str) -> list[tuple[str, str, str]]:
    rows = await conn.fetch("SELECT level, logger, message FROM job_logs WHERE job_id = $1 ORDER BY seq", job_id)
    return [(r["level"], r["logger"], r["message"]) for r in rows]


async def test_a_thread_reports_progress_and_lines(conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await _run(conn, dsn, "reports.thread", procs.ReportsFromThread())
    progress = await conn.fetchrow("SELECT fraction, message FROM job_progress WHERE job_id = $1", job_id)
    assert (progress["fraction"], progress["message"]) == (0.5, "half way, from a thread")
    assert await _lines(conn, job_id) == [("INFO", "job", "a line from the thread"),
                                          ("WARNING", "app.thread", "a logging record from the thread")]


async def test_a_process_reports_progress_and_lines(conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await _run(conn, dsn, "reports.process", procs.ReportsFromProcess())
    result = await conn.fetchval("SELECT result_data->>'pid' FROM jobs WHERE id = $1", job_id)
    assert int(result) != os.getpid(), "it ran in a process of its own"
    progress = await conn.fetchrow("SELECT fraction, message FROM job_progress WHERE job_id = $1", job_id)
    assert (progress["fraction"], progress["message"]) == (0.7, "most of the way, from a process")
    assert await _lines(conn, job_id) == [("WARNING", "job", "a line from the process"),
                                          ("INFO", "app.process", "a logging record from the process")]


class LogsBothWays(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        job.log("from job.log")
        logging.getLogger("app").info("from logging")
        return ProcessorResult({})


async def test_the_lines_of_a_traced_run_carry_its_ids(spans: InMemorySpanExporter,  # noqa: F811
                                                       conn: asyncpg.Connection, dsn: str) -> None:
    processors = {"traced.async": LogsBothWays(), "traced.thread": procs.ReportsFromThread()}
    async with await JobClient.connect(dsn, pool_size=2) as client:
        with trace.get_tracer("test").start_as_current_span("request"):
            ids = [await client.enqueue(t, {}) for t in processors]
    worker = RunningWorker(dsn, processors)
    try:
        for job_id in ids:
            await wait_for(lambda j=job_id: _done(conn, j), what="the traced jobs to complete")
    finally:
        await worker.stop()
    runs = {s.attributes["jobdesk.job.id"]: s for s in spans.get_finished_spans() if s.name == "jobdesk.run"}
    for job_id in ids:
        run = runs[job_id].get_span_context()
        rows = await conn.fetch("SELECT trace_id, span_id FROM job_logs WHERE job_id = $1", job_id)
        assert len(rows) == 2
        assert {(r["trace_id"], r["span_id"]) for r in rows} == {(f"{run.trace_id:032x}", f"{run.span_id:016x}")}


async def test_a_reused_process_reports_for_each_job_and_its_trace(spans: InMemorySpanExporter,  # noqa: F811
                                                                    conn: asyncpg.Connection, dsn: str) -> None:
    """Two traced jobs, one after the other in the same child: each gets its own progress and
    lines, carrying its own run's trace and span ids."""
    async with await JobClient.connect(dsn, pool_size=2) as client:
        ids = []
        for _ in range(2):
            with trace.get_tracer("test").start_as_current_span("request"):
                ids.append(await client.enqueue("reports.process", {}))
    worker = RunningWorker(dsn, {"reports.process": procs.ReportsFromProcess()}, MAX_CONCURRENT_JOBS=1)
    try:
        for job_id in ids:
            await wait_for(lambda j=job_id: _done(conn, j), what="the traced process jobs to complete")
    finally:
        await worker.stop()
    pids = {await conn.fetchval("SELECT result_data->>'pid' FROM jobs WHERE id = $1", j) for j in ids}
    assert len(pids) == 1 and int(pids.pop()) != os.getpid(), "both ran in one child of the worker's"
    runs = {s.attributes["jobdesk.job.id"]: s for s in spans.get_finished_spans() if s.name == "jobdesk.run"}
    for job_id in ids:
        progress = await conn.fetchrow("SELECT fraction, message FROM job_progress WHERE job_id = $1", job_id)
        assert (progress["fraction"], progress["message"]) == (0.7, "most of the way, from a process")
        assert await _lines(conn, job_id) == [("WARNING", "job", "a line from the process"),
                                              ("INFO", "app.process", "a logging record from the process")]
        run = runs[job_id].get_span_context()
        rows = await conn.fetch("SELECT trace_id, span_id FROM job_logs WHERE job_id = $1", job_id)
        assert {(r["trace_id"], r["span_id"]) for r in rows} == {(f"{run.trace_id:032x}", f"{run.span_id:016x}")}
