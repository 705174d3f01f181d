"""Processors for the tests of blocking code, time limits and the lease kept off the loop. A
processor run in a separate process is imported there by its module path, so they live here,
and a worker started by the CLI loads them with `--processors tests.runtime.offloop_processors`."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from pathlib import Path

from jobdesk import BaseProcessor, Job, ProcessorResult, SyncJob, SyncProcessor


def _note(job: Job | SyncJob, path: str | None = None) -> None:
    """Append "job-id attempt pid" to the file named by input_data["runs"] (or `path`)."""
    target = path or job.input_data.get("runs")
    if target:
        with Path(target).open("a") as out:
            out.write(f"{job.id} {job.attempt} {os.getpid()}\n")


class SleepsInThread(SyncProcessor):
    """A plain def that blocks: time.sleep(input_data["seconds"])."""

    def process(self, job: SyncJob) -> ProcessorResult:
        time.sleep(float(job.input_data.get("seconds", 1)))
        return ProcessorResult({"thread": threading.current_thread().name})


class Ticks(BaseProcessor):
    """An async processor that counts its ticks of 50 ms for input_data["seconds"]: it falls
    behind when anything blocks the loop."""

    async def process(self, job: Job) -> ProcessorResult:
        ticks = 0
        end = time.monotonic() + float(job.input_data["seconds"])
        while time.monotonic() < end:
            await asyncio.sleep(0.05)
            ticks += 1
        return ProcessorResult({"ticks": ticks})


class UsesJobFromThread(SyncProcessor):
    """A plain def that uses the Job API from its thread: a step, without await."""

    def process(self, job: SyncJob) -> ProcessorResult:
        first = job.step("add", lambda a, b: a + b, 2, 3)
        second = job.step("where", lambda: threading.current_thread().name)
        return ProcessorResult({"sum": first, "step_thread": second, "thread": threading.current_thread().name,
                                "id_seen": job.id, "attempt_seen": job.attempt})


class SleepsDurablyFromThread(SyncProcessor):
    """A plain def that suspends its job with job.sleep, without await, between two steps."""

    def process(self, job: SyncJob) -> ProcessorResult:
        before = job.step("before", time.time)
        job.sleep(0.3)
        after = job.step("after", time.time)
        assert isinstance(before, float) and isinstance(after, float)  # the stored results of time.time
        return ProcessorResult({"slept": after - before})


class AsyncWithSyncStep(BaseProcessor):
    """An async processor whose step is a plain function that blocks for input_data["seconds"]."""

    async def process(self, job: Job) -> ProcessorResult:
        seconds = float(job.input_data["seconds"])

        def blocking() -> str:
            time.sleep(seconds)
            return threading.current_thread().name

        return ProcessorResult({"step_thread": await job.step("block", blocking),
                                "loop_thread": threading.current_thread().name})


class WaitsForCancel(SyncProcessor):
    """Waits until job.cancelled turns true, then writes "cancelled" to input_data["flag"].
    `executor` is set by its subclasses; this one is a plain def in a thread."""

    def process(self, job: SyncJob) -> ProcessorResult:
        _note(job)
        end = time.monotonic() + 60
        while not job.cancelled and time.monotonic() < end:
            time.sleep(0.02)
        Path(job.input_data["flag"]).write_text("cancelled" if job.cancelled else "not cancelled")
        return ProcessorResult({})


class WaitsForCancelInProcess(WaitsForCancel):
    executor = "process"


class AsyncWaitsForCancel(BaseProcessor):
    """An async processor polling job.cancelled."""

    async def process(self, job: Job) -> ProcessorResult:
        _note(job)
        end = time.monotonic() + 60
        while not job.cancelled and time.monotonic() < end:
            await asyncio.sleep(0.02)
        Path(job.input_data["flag"]).write_text("cancelled" if job.cancelled else "not cancelled")
        return ProcessorResult({})


class Computes(SyncProcessor):
    """Runs in a separate process, and calls job methods that the worker carries out."""

    executor = "process"

    def process(self, job: SyncJob) -> ProcessorResult:
        first = job.emit_event(job.input_data["key"], {"from": os.getpid()})
        again = job.emit_event(job.input_data["key"], {"from": os.getpid()})
        try:
            job.sleep("not a number")  # type: ignore[arg-type]  # refused by the worker, raised here
            refused = ""
        except Exception as exc:  # noqa: BLE001 - what the worker raised, raised here
            refused = type(exc).__name__
        logging.getLogger("offloop.child").info("computed in %d", os.getpid())
        try:
            raise KeyError("missing")
        except KeyError:
            logging.getLogger("offloop.child").exception("handled")
        return ProcessorResult({"pid": os.getpid(), "total": sum(range(int(job.input_data["n"]))),
                                "first": first, "again": again, "refused": refused, "id_seen": job.id})


class FailsInProcess(SyncProcessor):
    executor = "process"

    def process(self, job: SyncJob) -> ProcessorResult:
        raise ValueError(f"bad input in {job.id}")


class HangsAsync(BaseProcessor):
    """Never returns by itself; limited to 1 s."""

    timeout = 1

    async def process(self, job: Job) -> ProcessorResult:
        _note(job)
        await asyncio.sleep(3600)
        return ProcessorResult({})


class HangsInThread(SyncProcessor):
    """Blocks its thread for input_data["seconds"]; limited to 1 s."""

    timeout = 1

    def process(self, job: SyncJob) -> ProcessorResult:
        _note(job)
        time.sleep(float(job.input_data.get("seconds", 4)))
        _note(job, job.input_data.get("late"))
        return ProcessorResult({"late": True})


class HangsInProcess(SyncProcessor):
    """Blocks its process for an hour; limited to 1 s: killed."""

    executor = "process"
    timeout = 1

    def process(self, job: SyncJob) -> ProcessorResult:
        _note(job)
        time.sleep(3600)
        return ProcessorResult({})


class BlocksTheLoop(BaseProcessor):
    """An async def that blocks the event loop with time.sleep(input_data["seconds"]), noting
    each run in input_data["runs"]."""

    async def process(self, job: Job) -> ProcessorResult:
        _note(job)
        time.sleep(float(job.input_data["seconds"]))
        return ProcessorResult({"pid": os.getpid()})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {"offloop.block_loop": BlocksTheLoop}


class ReportsFromThread(SyncProcessor):
    """A plain def that reports progress and log lines from its thread, without await."""

    def process(self, job: SyncJob) -> ProcessorResult:
        job.progress(0.5, "half way, from a thread")
        job.log("a line from the thread")
        logging.getLogger("app.thread").warning("a logging record from the thread")
        return ProcessorResult({"thread": threading.current_thread().name})


class ReportsFromProcess(SyncProcessor):
    """The same from a separate process."""

    executor = "process"

    def process(self, job: SyncJob) -> ProcessorResult:
        job.progress(0.7, "most of the way, from a process")
        job.log("a line from the process", "WARNING")
        logging.getLogger("app.process").info("a logging record from the process")
        return ProcessorResult({"pid": os.getpid()})


class IsASyncJob(SyncProcessor):
    """Says what its job is, from its thread (or, as InProcess below, its process)."""

    def process(self, job: SyncJob) -> ProcessorResult:
        job.progress(0.25, "a quarter")
        return ProcessorResult({"sync_job": isinstance(job, SyncJob), "pid": os.getpid(),
                                "thread": threading.current_thread().name, "cancelled": job.cancelled})


class IsASyncJobInProcess(IsASyncJob):
    executor = "process"


# Written before SyncProcessor: a BaseProcessor whose `process` is a plain def (mypy refuses that
# override in typed code, hence the assignment below). It still runs in a thread, or a process.
class PlainDefOnBase(BaseProcessor):
    pass


def _plain_process(self: BaseProcessor, job: Job) -> ProcessorResult:
    job.progress(0.5, "plain def on BaseProcessor")
    return ProcessorResult({"step": job.step("one", lambda: 1), "pid": os.getpid(),
                            "thread": threading.current_thread().name})


setattr(PlainDefOnBase, "process", _plain_process)  # noqa: B010 - see the comment above


class AwaitsReports(BaseProcessor):
    """An async def sent to a thread or a process by its subclasses: `await job.progress(...)`
    and `await job.log(...)` work there, as on the event loop."""

    async def process(self, job: Job) -> ProcessorResult:
        await job.progress(0.75, "awaited")
        await job.log("awaited line")
        return ProcessorResult({"pid": os.getpid(), "thread": threading.current_thread().name})


class AsyncDefInThread(AwaitsReports):
    executor = "thread"


class AsyncDefInProcess(AwaitsReports):
    executor = "process"
