"""Progress and per-job log lines, against a real PostgreSQL and a worker in the test's loop: what
a processor reports from its task and from threads, coalesced, bounded, escaped, and cleared by
a retry."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from fractions import Fraction

import asyncpg
import pytest

from jobdesk.core.job_report import JobReport
from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.store import transitions
from jobdesk.store.transitions import Actor
from tests.helpers import RunningWorker, wait_for


async def status_of(conn: asyncpg.Connection, job_id: str) -> str:
    return str(await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id))


async def run_one(conn: asyncpg.Connection, dsn: str, processor: BaseProcessor, *, status: str = "completed",
                  **settings: object) -> str:
    [job_id] = await transitions.enqueue(conn, [JobCreate("t", {})])
    worker = RunningWorker(dsn, {"t": processor}, **settings)
    try:
        await wait_for(lambda: _is(conn, job_id, status), what=f"the job to be {status}")
    finally:
        await worker.stop()
    return job_id


async def _is(conn: asyncpg.Connection, job_id: str, status: str) -> bool:
    return await status_of(conn, job_id) == status


async def logs_of(conn: asyncpg.Connection, job_id: str) -> list[asyncpg.Record]:
    return list(await conn.fetch("SELECT * FROM job_logs WHERE job_id = $1 ORDER BY attempt, seq", job_id))


class TightLoop(BaseProcessor):
    """Reports 20,000 times, in async code and from a thread without await."""

    async def process(self, job: Job) -> ProcessorResult:
        for i in range(10_000):
            await job.progress(i / 20_000, f"step {i}")

        def more() -> None:
            for i in range(10_000, 20_001):
                job.progress(i / 20_000, f"step {i}")  # no await: a thread's call

        await asyncio.to_thread(more)
        return ProcessorResult({})


async def test_progress_is_coalesced_and_the_last_value_written(conn: asyncpg.Connection, dsn: str) -> None:
    processor = TightLoop()
    [job_id] = await transitions.enqueue(conn, [JobCreate("t", {})])
    worker = RunningWorker(dsn, {"t": processor})
    try:
        await wait_for(lambda: _is(conn, job_id, "completed"), what="the job to complete")
        writes = worker.worker.reports.writes
    finally:
        await worker.stop()
    row = await conn.fetchrow("SELECT * FROM job_progress WHERE job_id = $1", job_id)
    assert row["fraction"] == 1.0 and row["message"] == "step 20000"
    # 20,001 reports cost a handful of statements, not one each.
    assert 1 <= writes < 50, writes


class Logs(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        logging.getLogger("my.app").info("started %s", job.id)
        logging.getLogger("my.app").debug("not kept at INFO")
        await job.log("by job.log")
        job.log("a warning, no await", level="warning")

        def in_thread() -> None:
            logging.getLogger("my.thread").warning("from a thread")

        await asyncio.to_thread(in_thread)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, contextvars.copy_context().run, in_thread)
        logging.getLogger("my.app").info("nul \x00 and lone \udc80 surrogate")
        try:
            raise KeyError("inside")
        except KeyError:
            logging.getLogger("my.app").exception("caught")
        return ProcessorResult({})


async def test_log_records_of_any_logger_are_kept_with_the_attempt(conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await run_one(conn, dsn, Logs())
    lines = await logs_of(conn, job_id)
    got = [(r["level"], r["logger"], r["message"].splitlines()[0]) for r in lines]
    started = [g for g in got if g[2].startswith("started")]
    assert started == [("INFO", "my.app", f"started {job_id}")]
    assert ("INFO", "job", "by job.log") in got
    assert ("WARNING", "job", "a warning, no await") in got
    assert got.count(("WARNING", "my.thread", "from a thread")) == 2
    assert ("INFO", "my.app", "nul \\x00 and lone \\udc80 surrogate") in got
    caught = [r["message"] for r in lines if r["message"].startswith("caught")]
    assert caught and "KeyError: 'inside'" in caught[0]
    assert not any("not kept" in g[2] for g in got)
    assert [r["seq"] for r in lines] == list(range(1, len(lines) + 1))
    assert {r["attempt"] for r in lines} == {1}
    assert all(r["trace_id"] is None and r["span_id"] is None for r in lines)
    # The worker's own records of the run (its outcome) are not the job's.
    assert not any(g[1].startswith("jobdesk") for g in got)


class Floods(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        line = "x" * 1000
        for i in range(10_500):  # about 10 MB
            logging.getLogger("flood").info("%d %s", i, line)
        return ProcessorResult({})


async def test_a_job_that_logs_10_mb_keeps_its_first_lines_and_says_how_many_it_dropped(
        conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await run_one(conn, dsn, Floods())
    lines = await logs_of(conn, job_id)
    assert len(lines) == 1000 + 1
    assert [int(r["message"].split()[0]) for r in lines[:-1]] == list(range(1000))
    marker = lines[-1]
    assert marker["level"] == "WARNING" and marker["message"].startswith("9500 more log line(s) of this attempt")


async def test_the_byte_bound_holds_too(conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await run_one(conn, dsn, Floods(), JOB_LOG_MAX_BYTES=20_000, JOB_LOG_LEVEL="INFO")
    lines = await logs_of(conn, job_id)
    kept = lines[:-1]
    assert 15 <= len(kept) <= 20 and sum(len(r["message"]) for r in kept) <= 20_000
    assert lines[-1]["message"].startswith(f"{10_500 - len(kept)} more log line(s)")


class BadProgress(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        refused = []
        for value in (1.5, -0.1, float("nan"), "half", None, True):
            try:
                job.progress(value)  # type: ignore[arg-type]
            except ValueError as exc:
                refused.append(str(exc))
        await job.progress(0.25, "fine")
        return ProcessorResult({"refused": refused})


async def test_bad_progress_raises_value_error_and_writes_nothing(conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await run_one(conn, dsn, BadProgress())
    refused = await conn.fetchval("SELECT result_data->'refused' FROM jobs WHERE id = $1", job_id)
    assert len(refused) == 6 and all(r.startswith("progress must be a number from 0 to 1") for r in refused)
    row = await conn.fetchrow("SELECT fraction, message FROM job_progress WHERE job_id = $1", job_id)
    assert (row["fraction"], row["message"]) == (0.25, "fine")


class FailsHalfway(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        await job.progress(0.5, f"attempt {job.attempt}")
        logging.getLogger("half").info("attempt %d", job.attempt)
        raise RuntimeError("halfway")


async def test_progress_is_kept_after_the_end_and_cleared_by_a_retry(conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await run_one(conn, dsn, FailsHalfway(), status="failed", JOB_RETRY_INTERVALS=[0.05])
    row = await conn.fetchrow("SELECT fraction, message FROM job_progress WHERE job_id = $1", job_id)
    assert (row["fraction"], row["message"]) == (0.5, "attempt 2")
    lines = await logs_of(conn, job_id)
    assert [(r["attempt"], r["message"]) for r in lines] == [(1, "attempt 1"), (2, "attempt 2")]
    await transitions.retry(conn, [job_id], Actor("test", "test"))
    assert await conn.fetchval("SELECT count(*) FROM job_progress WHERE job_id = $1", job_id) == 0
    assert len(await logs_of(conn, job_id)) == 2  # the history stays


async def test_logs_and_progress_are_pruned_with_their_job(conn: asyncpg.Connection, dsn: str) -> None:
    job_id = await run_one(conn, dsn, FailsHalfway(), status="failed", JOB_RETRY_INTERVALS=[])
    assert len(await logs_of(conn, job_id)) == 1
    await conn.execute("DELETE FROM jobs WHERE id = $1", job_id)
    assert await conn.fetchval("SELECT count(*) FROM job_logs WHERE job_id = $1", job_id) == 0
    assert await conn.fetchval("SELECT count(*) FROM job_progress WHERE job_id = $1", job_id) == 0


def test_a_report_takes_calls_from_many_threads_at_once() -> None:
    report = JobReport("j", 1, max_lines=100_000, max_bytes=10_000_000)

    def spam(n: int) -> None:
        for i in range(2000):
            report.add_line("INFO", "t", f"{n}-{i}")
            report.set_progress(i / 2000, None)

    threads = [threading.Thread(target=spam, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    progress, lines = report.close()
    assert len(lines) == 16_000 and [ln.seq for ln in lines] == list(range(1, 16_001))
    assert progress is not None
    report.add_line("INFO", "t", "after the end")
    assert report.take() == (None, [])


async def test_progress_and_log_outside_a_worker_only_check_their_input() -> None:
    job = Job("j", "t", {}, None, None, 0)
    await job.progress(0.5)
    await job.progress(Fraction(1, 3))
    await job.progress(1)
    job.log("nowhere")
    with pytest.raises(ValueError, match="from 0 to 1"):
        job.progress(2)
    with pytest.raises(ValueError, match="log level"):
        job.log("x", level="LOUD")


class Levels(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        logging.getLogger("lv").debug("a debug record")
        logging.getLogger("lv").info("an info record")
        job.log("an info line")
        job.log("a warning line", level="WARNING")
        logging.getLogger("lv").error("an error record")
        logging.getLogger("own.level").info("an info record of a logger set to INFO")
        return ProcessorResult({})


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize(("level", "kept"), [
    ("DEBUG", ["a debug record", "an info record", "an info line", "a warning line", "an error record",
               "an info record of a logger set to INFO"]),
    ("INFO", ["an info record", "an info line", "a warning line", "an error record",
              "an info record of a logger set to INFO"]),
    ("WARNING", ["a warning line", "an error record"]),
])
async def test_job_log_level_keeps_that_level_and_above_and_stderr_shows_what_it_did(
        conn: asyncpg.Connection, dsn: str, level: str, kept: list[str]) -> None:
    root = logging.getLogger()
    stderr = Collect()  # as the worker's stderr handler: it follows the root's level
    root.addHandler(stderr)
    old_level = root.level
    root.setLevel(logging.WARNING)
    logging.getLogger("own.level").setLevel(logging.INFO)  # as caplog.set_level(INFO, logger=...) does
    try:
        job_id = await run_one(conn, dsn, Levels(), JOB_LOG_LEVEL=level)
        assert root.level == logging.WARNING and not stderr.filters, "put back as they were"
    finally:
        root.removeHandler(stderr)
        root.setLevel(old_level)
        logging.getLogger("own.level").setLevel(logging.NOTSET)
    assert [r["message"] for r in await logs_of(conn, job_id)] == kept
    shown = [m for m in stderr.messages if "record" in m]
    assert shown == ["an error record", "an info record of a logger set to INFO"], \
        "the root's handlers show what they showed before: WARNING and up, and what a logger's own level lets in"


async def test_the_builtin_sleep_reports_its_progress(conn: asyncpg.Connection, dsn: str) -> None:
    from jobdesk.processors.builtin import SleepProcessor

    [long, short] = await transitions.enqueue(conn, [JobCreate("sleep", {"seconds": 2.2}),
                                                     JobCreate("sleep", {"seconds": 0.1})])
    worker = RunningWorker(dsn, {"sleep": SleepProcessor()})
    try:
        await wait_for(lambda: conn.fetchval("SELECT fraction FROM job_progress WHERE job_id = $1", long),
                       what="a progress while it sleeps")
        assert await status_of(conn, long) == "in_progress"
        await wait_for(lambda: _is(conn, long, "completed"), what="the sleep to end")
    finally:
        await worker.stop()
    row = await conn.fetchrow("SELECT fraction, message FROM job_progress WHERE job_id = $1", long)
    assert (row["fraction"], row["message"]) == (1.0, "slept 2 of 2.2 s")
    assert await conn.fetchval("SELECT count(*) FROM job_progress WHERE job_id = $1", short) == 0
