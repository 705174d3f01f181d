"""Time limits: a run past its limit ends its attempt with `timed out after N s` and is retried,
whether it ran on the loop (cancelled), in a thread (abandoned) or in a process (killed); the
limit comes from JOB_TYPE_TIMEOUTS, else the processor's `timeout`, else JOB_TIMEOUT; and a
durable job's limit applies to each run, not to the time it spent suspended."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor, timeout_text
from jobdesk.core.settings import load_settings
from jobdesk.runtime.execution import time_limit
from jobdesk.store import transitions
from tests.helpers import RunningWorker, run_cli, wait_for
from tests.runtime import offloop_processors as procs


async def _ended(conn: asyncpg.Connection, job_id: str, status: str) -> bool:
    return await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == status


async def _attempts(conn: asyncpg.Connection, job_id: str) -> list[tuple[str, str | None]]:
    rows = await conn.fetch("SELECT outcome, error_message FROM job_attempts WHERE job_id = $1 ORDER BY attempt",
                            job_id)
    return [(r["outcome"], r["error_message"]) for r in rows]


def test_timeout_text_writes_the_number_as_given() -> None:
    assert timeout_text(30) == "timed out after 30 s"
    assert timeout_text(0.5) == "timed out after 0.5 s"
    assert timeout_text(600.0) == "timed out after 600 s"


def test_the_type_setting_wins_over_the_classvar_which_wins_over_the_default() -> None:
    class Limited(BaseProcessor):
        timeout = 20

    class Unlimited(BaseProcessor):
        pass

    assert time_limit("a", Limited(), {"a": 5}, 99) == 5
    assert time_limit("a", Limited(), {"b": 5}, 99) == 20
    assert time_limit("a", Unlimited(), {"b": 5}, 99) == 99
    assert time_limit("a", Unlimited(), {}, None) is None


def test_the_settings_read_types_and_seconds() -> None:
    settings = load_settings(JOB_TYPE_TIMEOUTS="video.render=600, email.send=0.5,report=10m", JOB_TIMEOUT="30")
    assert settings.JOB_TYPE_TIMEOUTS == {"video.render": 600, "email.send": 0.5, "report": 600}
    assert settings.JOB_TIMEOUT == 30
    assert load_settings().JOB_TIMEOUT is None and load_settings().JOB_TYPE_TIMEOUTS == {}


@pytest.mark.parametrize("value", ["video.render", "video.render=soon", "video.render=0", "=5"])
def test_a_malformed_type_timeouts_gets_one_line_naming_it(value: str) -> None:
    done = run_cli("worker", dsn=None, JOB_TYPE_TIMEOUTS=value)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "JOB_TYPE_TIMEOUTS" in lines[0] and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("processor", [procs.HangsAsync, procs.HangsInThread, procs.HangsInProcess])
async def test_a_hung_run_times_out_and_is_retried(conn: asyncpg.Connection, dsn: str, tmp_path: Path,
                                                  processor: type[BaseProcessor],
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="jobdesk.worker")
    late = tmp_path / "late"
    job = JobCreate("hangs", {"runs": str(tmp_path / "runs"), "seconds": 3, "late": str(late)})
    await transitions.enqueue(conn, [job])
    worker = RunningWorker(dsn, {"hangs": processor()}, JOB_RETRY_INTERVALS=[0.1])
    started = time.monotonic()
    try:
        await wait_for(lambda: _ended(conn, job.id, "failed"), what="both attempts to time out")
        took = time.monotonic() - started
    finally:
        await worker.stop()
    assert await _attempts(conn, job.id) == [("failed", "timed out after 1 s")] * 2
    assert await conn.fetchval("SELECT error_message FROM jobs WHERE id = $1", job.id) == "timed out after 1 s"
    runs = (tmp_path / "runs").read_text().split("\n")[:-1]
    assert [r.split()[1] for r in runs] == ["1", "2"]  # two attempts, each ran
    assert took < 15  # an hour-long hang each time would never end
    abandoned = [r for r in caplog.records if "its thread cannot be stopped" in r.getMessage()]
    if processor is procs.HangsInThread:
        assert len(abandoned) == 2
        await wait_for(lambda: _has_lines(late, 2), what="the abandoned threads to finish")
        # Their late results were ignored: the job stays failed with its time-out.
        await asyncio.sleep(0.3)
        assert await _attempts(conn, job.id) == [("failed", "timed out after 1 s")] * 2
    else:
        assert not abandoned
    if processor is procs.HangsAsync:  # `jobdesk show` shows the error of each attempt
        shown = run_cli("show", job.id, dsn=dsn)
        assert shown.returncode == 0 and shown.stdout.count("timed out after 1 s") >= 2, shown.stdout
    if processor is procs.HangsInProcess:
        pids = {int(r.split()[2]) for r in runs}
        assert os.getpid() not in pids
        for pid in pids:  # killed, not left running
            await wait_for(lambda pid=pid: _gone(pid), timeout=10, what=f"process {pid} to end")


async def _has_lines(path: Path, n: int) -> bool:
    return path.exists() and len(path.read_text().splitlines()) >= n


async def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_worker_applies_the_type_setting_then_the_classvar_then_job_timeout(conn: asyncpg.Connection,
                                                                                    dsn: str) -> None:
    slow = JobCreate("ticks", {"seconds": 5})
    quick = JobCreate("own.limit", {"seconds": 0.1})  # its own limit (1 s) wins over JOB_TIMEOUT
    overridden = JobCreate("set.by.type", {"seconds": 5})  # the setting wins over its 1 s
    await transitions.enqueue(conn, [slow, quick, overridden])
    worker = RunningWorker(dsn, {"ticks": procs.Ticks(), "own.limit": procs.HangsInThread(),
                                 "set.by.type": procs.HangsAsync()},
                           JOB_TIMEOUT=0.05, JOB_TYPE_TIMEOUTS={"set.by.type": 2.5}, JOB_RETRY_INTERVALS=[])
    try:
        await wait_for(lambda: _ended(conn, slow.id, "failed"), what="the slow job to time out")
        await wait_for(lambda: _ended(conn, quick.id, "completed"), what="the other job to complete")
        await wait_for(lambda: _ended(conn, overridden.id, "failed"), what="the overridden job to time out")
    finally:
        await worker.stop()
    assert await _attempts(conn, slow.id) == [("failed", "timed out after 0.05 s")]
    assert await _attempts(conn, overridden.id) == [("failed", "timed out after 2.5 s")]


class SleepsBetweenSteps(BaseProcessor):
    """Two steps of 0.4 s with a durable sleep of 1.5 s between them, under a 1 s limit."""

    timeout = 1

    async def process(self, job: Job) -> ProcessorResult:
        await job.step("first", asyncio.sleep, 0.4)
        await job.sleep(1.5)
        await job.step("second", asyncio.sleep, 0.4)
        return ProcessorResult({"done": True})


async def test_a_durable_jobs_limit_applies_per_run(conn: asyncpg.Connection, dsn: str) -> None:
    job = JobCreate("durable.slow", {})
    await transitions.enqueue(conn, [job])
    started = time.monotonic()
    worker = RunningWorker(dsn, {"durable.slow": SleepsBetweenSteps()}, JOB_RETRY_INTERVALS=[])
    try:
        await wait_for(lambda: _ended(conn, job.id, "completed"), what="the durable job to complete")
    finally:
        await worker.stop()
    assert time.monotonic() - started > 1.5  # longer than the limit in all, within it in each run
    # One suspension, and no attempt that timed out (a completion writes no attempt row).
    assert [outcome for outcome, _ in await _attempts(conn, job.id)] == ["suspended"]
    assert await conn.fetchval("SELECT error_message FROM jobs WHERE id = $1", job.id) is None
