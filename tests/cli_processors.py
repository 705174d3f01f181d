"""Processors used by the CLI and multi-worker tests, loaded with `--processors cli_processors`."""

from __future__ import annotations

import os
from pathlib import Path

from jobdesk import BaseProcessor, Job, ProcessorResult


class RecordRun(BaseProcessor):
    """Appends "job-id pid" to the file in RUN_LOG, so tests can count executions."""

    async def process(self, job: Job) -> ProcessorResult:
        with Path(os.environ["RUN_LOG"]).open("a") as log:
            log.write(f"{job.id} {os.getpid()}\n")
        return ProcessorResult({"pid": os.getpid()})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {"test.record": RecordRun}


class SleepRecord(BaseProcessor):
    """Sleeps input_data["seconds"] (default 0.01), then records the run like RecordRun. With
    START_LOG set, it first appends the job's id to that file: the run has begun."""

    async def process(self, job: Job) -> ProcessorResult:
        import asyncio

        if "START_LOG" in os.environ:
            with Path(os.environ["START_LOG"]).open("a") as log:
                log.write(f"{job.id}\n")
        await asyncio.sleep(float(job.input_data.get("seconds", 0.01)))
        with Path(os.environ["RUN_LOG"]).open("a") as log:
            log.write(f"{job.id} {os.getpid()}\n")
        return ProcessorResult({"pid": os.getpid()})


PROCESSOR_MAP["test.sleep_record"] = SleepRecord


class AlwaysFail(BaseProcessor):
    """Fails every attempt, so tests see retries and a job that fails for good."""

    async def process(self, job: Job) -> ProcessorResult:
        raise RuntimeError("this processor always fails")


PROCESSOR_MAP["test.fail"] = AlwaysFail
