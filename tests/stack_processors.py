"""Processors that hold still in a known place until released, for the tests of running jobs'
stacks: one per executor. The process one is imported by its child by module path, so it lives
in a module of its own; it is released by a file, which the child can see."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor, SyncProcessor
from jobdesk.core.sync_job import SyncJob


class AsyncHold(BaseProcessor):
    """Awaits a coroutine of its own, which awaits an event: the stack goes through both."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def process(self, job: Job) -> ProcessorResult:
        await self.hold_async()
        return ProcessorResult({})

    async def hold_async(self) -> None:
        await self.release.wait()  # the async job waits here


class ThreadHold(SyncProcessor):
    """A plain `def` processor, run in a thread, that waits in a function of its own."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def process(self, job: SyncJob) -> ProcessorResult:
        hold_in_thread(self.release)
        return ProcessorResult({})


def hold_in_thread(release: threading.Event) -> None:
    while not release.wait(0.05):  # the thread job waits here
        pass


class ProcessHold(SyncProcessor):
    """Run in a child process; waits until the file its input names exists."""

    executor = "process"

    def process(self, job: SyncJob) -> ProcessorResult:
        hold_in_process(Path(job.input_data["release"]))
        return ProcessorResult({})


def hold_in_process(release: Path) -> None:
    while not release.exists():
        time.sleep(0.02)  # the process job waits here


class LoopBlocker(BaseProcessor):
    """An `async def` that calls blocking code: it holds the worker's event loop until the file
    its input names exists (after touching the one that says it has started)."""

    async def process(self, job: Job) -> ProcessorResult:
        Path(job.input_data["started"]).touch()
        block_the_loop(Path(job.input_data["release"]))
        return ProcessorResult({})


def block_the_loop(release: Path) -> None:
    while not release.exists():
        time.sleep(0.02)  # the worker's event loop is blocked here


PROCESSOR_MAP = {"block": LoopBlocker}  # for `jobdesk worker --processors stack_processors`
