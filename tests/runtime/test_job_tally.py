"""What a worker says of the jobs it finishes: at DEBUG a line per job (id, type, outcome,
duration), at INFO a summary a minute (jobdesk.observe.job_tally)."""

from __future__ import annotations

import logging

import pytest

from jobdesk import JobClient, Status
from jobdesk.core.settings import load_settings
from jobdesk.observe.job_tally import JobTally
from jobdesk.processors.builtin import EchoProcessor
from tests.cli_processors import AlwaysFail
from tests.helpers import RunningWorker, wait_for


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "jobdesk.worker" and r.levelno == level]


async def test_at_debug_each_finished_job_has_a_line(dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="jobdesk.worker")
    async with await JobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2) as jobs:
        running = RunningWorker(dsn, {"echo": EchoProcessor(), "test.fail": AlwaysFail()}, JOB_RETRY_INTERVALS=[0.05])
        done = await jobs.run("echo", {"n": 1}, timeout=30)
        failed = await jobs.run("test.fail", {}, timeout=30)
        tally = running.worker.outcomes.tally
        await running.stop()
    assert done.status == Status.COMPLETED and failed.status == Status.FAILED
    debug = [line for line in lines(caplog, logging.DEBUG) if done.id in line]
    assert len(debug) == 1 and debug[0].startswith(f"job {done.id} (echo) completed in 0.0"), debug
    assert debug[0].endswith(" s")
    retried = [line for line in lines(caplog, logging.INFO) if failed.id in line]
    assert len(retried) == 1 and f"job {failed.id} (test.fail) failed in " in retried[0], retried
    assert any(f"job {failed.id} (test.fail) failed for good after 1 retries, in " in line
               for line in lines(caplog, logging.ERROR))
    assert tally.summary() == ("in the last minute: 1 completed, 1 failed, 1 retried "
                               "(echo: 1 completed, 0 failed, 0 retried; test.fail: 0 completed, 1 failed, 1 retried)")
    assert tally.summary() is None, "counted since the last summary"


async def test_at_info_no_line_per_job(dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobdesk.worker")
    async with await JobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2) as jobs:
        running = RunningWorker(dsn, {"echo": EchoProcessor()})
        records = [await jobs.run("echo", {"n": n}, timeout=30) for n in range(3)]
        tally = running.worker.outcomes.tally
        assert not tally.each
        # A job reads as completed once its batch commits; the worker counts it just after.

        async def counted() -> bool:
            return tally.counts["echo"][0] == 3

        await wait_for(counted, what="the third completion counted")
        summary = tally.summary()
        await running.stop()
    assert not any(r.id in line for r in records for line in lines(caplog, logging.INFO))
    assert summary == "in the last minute: 3 completed, 0 failed, 0 retried (echo)"


def test_many_types_are_summed_up() -> None:
    tally = JobTally(logging.getLogger("jobdesk.test"))
    for n in range(7):
        tally.completed(f"id-{n}", f"type-{n}", 0.01)
    tally.failed("type-1", retried=True)
    assert tally.summary() == "in the last minute: 7 completed, 0 failed, 1 retried"


async def test_the_summary_is_logged_while_jobs_finish(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    caplog.set_level(logging.INFO, logger="jobdesk.test")
    tally = JobTally(logging.getLogger("jobdesk.test"))
    stop = asyncio.Event()
    task = asyncio.create_task(tally.run(stop, every_s=0.01))
    tally.completed("a", "echo", 0.01)
    while not any("in the last minute" in r.getMessage() for r in caplog.records):
        await asyncio.sleep(0.01)
    stop.set()
    await task
    said = [r.getMessage() for r in caplog.records if "in the last minute" in r.getMessage()]
    assert said == ["in the last minute: 1 completed, 0 failed, 0 retried (echo)"], "nothing when nothing finished"
