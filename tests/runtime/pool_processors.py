"""Processors for the tests of the process pool (executor "process"). A child imports them by
their module path, so they live in a module of their own; each run notes "job-id attempt pid"
in the file named by input_data["runs"], when there is one."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from jobdesk import ProcessorResult, SyncJob, SyncProcessor
from jobdesk.runtime.child import resident_memory

_runs_here = 0  # runs of these processors in this process: a module global, kept by a reused child
_kept: list[bytes] = []  # memory a job leaves behind on purpose


def _note(job: SyncJob) -> None:
    target = job.input_data.get("runs")
    if target:
        with Path(target).open("a") as out:
            out.write(f"{job.id} {job.attempt} {os.getpid()}\n")


class InProcess(SyncProcessor):
    executor = "process"


class Ids(InProcess):
    """Says where it ran: the pid, how many runs this process has done, and whether its job
    came cancelled or carrying an attribute an earlier job set."""

    def process(self, job: SyncJob) -> ProcessorResult:
        global _runs_here
        _runs_here += 1
        _note(job)
        inherited = "left_by_an_earlier_job" in vars(job)
        job.left_by_an_earlier_job = job.id  # type: ignore[attr-defined]
        return ProcessorResult({"pid": os.getpid(), "runs_here": _runs_here, "cancelled": job.cancelled,
                                "inherited": inherited})


class Holds(InProcess):
    """Keeps input_data["mb"] MiB in this process, and says its resident memory after that."""

    def process(self, job: SyncJob) -> ProcessorResult:
        _note(job)
        _kept.append(b"\x01" * (int(job.input_data.get("mb", 0)) * 1024 * 1024))
        return ProcessorResult({"pid": os.getpid(), "rss": resident_memory()})


class SegfaultsFirst(InProcess):
    """Its first attempt kills its own process with SIGSEGV, as a crash in C code would (or with
    the signal named by input_data["signal"]: SIGKILL, as the OOM killer does); the next one
    completes."""

    def process(self, job: SyncJob) -> ProcessorResult:
        _note(job)
        if job.attempt == 1:
            os.kill(os.getpid(), signal.Signals[job.input_data.get("signal", "SIGSEGV")])
            time.sleep(60)
        return ProcessorResult({"pid": os.getpid()})


class IgnoresCancel(InProcess):
    """Sleeps for an hour whatever happens: a cancel ends it only by killing its process."""

    def process(self, job: SyncJob) -> ProcessorResult:
        _note(job)
        time.sleep(3600)
        return ProcessorResult({})
