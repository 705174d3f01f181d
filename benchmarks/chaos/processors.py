"""The processor the chaos workers run: it sleeps for the job's `ms`, and appends one line when
a run starts and one when it ends to a file of its worker process, so that the runs of every job
can be counted afterwards, even for a worker killed with SIGKILL (each line is one write(2) to a
file opened with O_APPEND: written lines survive the process).

Lines: `S <job id> <attempt> <pid> <unix time>` and `E <job id> <attempt> <pid> <unix time>`.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from jobdesk import BaseProcessor, Job, ProcessorResult

RUNS_DIR_ENV = "CHAOS_RUNS_DIR"
_fd: int | None = None


def _record(kind: str, job: Job) -> None:
    global _fd
    if _fd is None:
        path = Path(os.environ[RUNS_DIR_ENV]) / f"runs-{os.getpid()}.log"
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(_fd, f"{kind} {job.id} {job.attempt} {os.getpid()} {time.time():.6f}\n".encode())


class Sleep(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        _record("S", job)
        ms = float(job.input_data.get("ms", 0))
        if ms > 0:
            await asyncio.sleep(ms / 1000)
        _record("E", job)
        return ProcessorResult({})


PROCESSOR_MAP: dict[str, type[BaseProcessor]] = {"chaos.sleep": Sleep}
