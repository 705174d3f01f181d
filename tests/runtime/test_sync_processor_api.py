"""SyncProcessor: a plain `def process` given a SyncJob, in a thread by default or in a process,
refused with a clear message when told "async"; and a BaseProcessor's plain def, or its async def
sent to a thread or a process, run as they always have."""

from __future__ import annotations

import os

import asyncpg
import pytest

from jobdesk import BaseProcessor, ProcessorResult, SyncJob, SyncProcessor
from jobdesk.core.errors import ProcessorLoadError
from jobdesk.core.models import JobCreate
from jobdesk.core.processor import executor_of
from jobdesk.runtime.registry import instantiate
from jobdesk.store import transitions
from tests.helpers import RunningWorker, wait_for
from tests.runtime import offloop_processors as procs


def test_a_sync_processor_runs_in_a_thread_unless_told_process() -> None:
    assert executor_of(procs.IsASyncJob) == "thread"
    assert executor_of(procs.IsASyncJob()) == "thread"
    assert executor_of(procs.IsASyncJobInProcess) == "process"
    assert executor_of(procs.PlainDefOnBase) == "thread"
    assert executor_of(procs.AsyncDefInProcess) == "process"


def test_a_sync_processor_told_async_is_refused_when_loaded() -> None:
    class ToldAsync(SyncProcessor):
        executor = "async"  # type: ignore[assignment]  # what mypy refuses too

        def process(self, job: SyncJob) -> ProcessorResult:
            return ProcessorResult({})

    with pytest.raises(ProcessorLoadError, match=r"processor for type 'told': ToldAsync.executor is 'async': "
                                                 r"a SyncProcessor runs in a thread or a process"):
        instantiate({"told": ToldAsync})


def test_a_sync_processor_with_an_async_def_is_refused_when_loaded() -> None:
    class AsyncDef(SyncProcessor):
        pass

    async def process(self: SyncProcessor, job: SyncJob) -> ProcessorResult:
        return ProcessorResult({})

    setattr(AsyncDef, "process", process)  # noqa: B010 - what mypy refuses as an override

    with pytest.raises(ProcessorLoadError, match=r"AsyncDef.process is an async def: a SyncProcessor's process "
                                                 r"is a plain def; subclass BaseProcessor"):
        instantiate({"async.def": AsyncDef})


async def _run(conn: asyncpg.Connection, dsn: str,
               processors: dict[str, BaseProcessor | SyncProcessor]) -> dict[str, asyncpg.Record]:
    ids = await transitions.enqueue(conn, [JobCreate(t, {}) for t in processors])
    worker = RunningWorker(dsn, processors)
    try:
        await wait_for(lambda: conn.fetchval("SELECT bool_and(status = 'completed') FROM jobs WHERE id = ANY($1)",
                                             ids), what="every job to complete")
    finally:
        await worker.stop()
    rows = await conn.fetch("SELECT j.type, j.result_data, p.fraction, p.message FROM jobs j "
                            "LEFT JOIN job_progress p ON p.job_id = j.id WHERE j.id = ANY($1)", ids)
    return {r["type"]: r for r in rows}


async def test_a_sync_processor_gets_a_sync_job_in_a_thread_and_in_a_process(conn: asyncpg.Connection,
                                                                             dsn: str) -> None:
    rows = await _run(conn, dsn, {"sync.thread": procs.IsASyncJob(), "sync.process": procs.IsASyncJobInProcess()})
    thread, process = rows["sync.thread"], rows["sync.process"]
    assert thread["result_data"]["sync_job"] and process["result_data"]["sync_job"]
    assert thread["result_data"]["cancelled"] is False and process["result_data"]["cancelled"] is False
    assert thread["result_data"]["thread"].startswith("jobdesk-job") and thread["result_data"]["pid"] == os.getpid()
    assert process["result_data"]["pid"] != os.getpid()
    assert (thread["fraction"], thread["message"]) == (process["fraction"], process["message"]) == (0.25, "a quarter")


async def test_base_processors_off_the_loop_run_as_before(conn: asyncpg.Connection, dsn: str) -> None:
    rows = await _run(conn, dsn, {"base.plain": procs.PlainDefOnBase(), "base.async.thread": procs.AsyncDefInThread(),
                                  "base.async.process": procs.AsyncDefInProcess()})
    plain = rows["base.plain"]
    assert plain["result_data"]["step"] == 1 and plain["result_data"]["thread"].startswith("jobdesk-job")
    assert (plain["fraction"], plain["message"]) == (0.5, "plain def on BaseProcessor")
    for job_type in ("base.async.thread", "base.async.process"):
        assert (rows[job_type]["fraction"], rows[job_type]["message"]) == (0.75, "awaited")
    assert rows["base.async.thread"]["result_data"]["thread"].startswith("jobdesk-job")
    assert rows["base.async.process"]["result_data"]["pid"] != os.getpid()
    logged = await conn.fetch("SELECT j.type FROM job_logs l JOIN jobs j ON j.id = l.job_id "
                              "WHERE l.message = 'awaited line'")
    assert sorted(r["type"] for r in logged) == ["base.async.process", "base.async.thread"]

