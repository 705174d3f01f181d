"""Progress and job logs benchmark: what reporting costs the database and the worker.

    python benchmarks/progress_logs_bench.py [--seconds 5] [--jobs 10] [--lines 1000]

It starts its own embedded PostgreSQL in a temporary folder and runs a worker in this process
(MAX_CONCURRENT_JOBS=10), counting the statements that write progress and log lines (each a call
of `jobdesk.store.job_reports.write`, one round trip).

* progress: one job calls `job.progress` in a tight loop for `--seconds` (yielding to the loop
  every 1,000 calls), then `--jobs` such jobs at once, then one job that reports from a thread
  without await: calls per second, and database writes per second, per job and in all.
* logs: a job that logs `--lines` lines through `logging` (an INFO record with one argument,
  ~60 bytes): the worker's CPU per line inside a run (where the records are kept) and outside one
  (the same logger call with no run in its context, which the job's handler passes over; both
  with the root logger at INFO, as a worker at JOB_LOG_LEVEL=INFO has it), the statements written per job, and
  the lines stored. Then a job that logs 10 MB (10,500 lines of 1 KB): its time, and what was kept.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import fresh_database, private_server  # noqa: E402
from jobdesk.core.models import Job, JobCreate, ProcessorResult  # noqa: E402
from jobdesk.core.processor import BaseProcessor  # noqa: E402
from jobdesk.core.settings import load_settings  # noqa: E402
from jobdesk.runtime.job_reports import current_job  # noqa: E402
from jobdesk.runtime.worker import Worker  # noqa: E402
from jobdesk.store import job_reports, transitions  # noqa: E402
from tests import pg  # noqa: E402

log = logging.getLogger("bench.job")
writes: list[float] = []  # the time of each statement that wrote progress or lines
_write = job_reports.write


async def counted_write(*args: Any, **kwargs: Any) -> int:
    writes.append(time.monotonic())
    return await _write(*args, **kwargs)


job_reports.write = counted_write  # type: ignore[assignment]


class TightProgress(BaseProcessor):
    seconds = 5.0
    calls: list[int] = []

    async def process(self, job: Job) -> ProcessorResult:
        end, n = time.monotonic() + self.seconds, 0
        while time.monotonic() < end:
            for _ in range(1000):
                n += 1
                await job.progress((n % 1000) / 1000, "working")
            await asyncio.sleep(0)
        await job.progress(1.0, "done")
        self.calls.append(n)
        return ProcessorResult({"calls": n})


class ThreadProgress(TightProgress):
    async def process(self, job: Job) -> ProcessorResult:
        def work() -> int:
            end, n = time.monotonic() + self.seconds, 0
            while time.monotonic() < end:
                n += 1
                job.progress((n % 1000) / 1000, "working")  # no await: a thread's call
            return n

        n = await asyncio.to_thread(work)
        self.calls.append(n)
        return ProcessorResult({"calls": n})


class Lines(BaseProcessor):
    lines = 1000
    size = 60
    inside: list[float] = []  # CPU seconds per line, inside the run
    outside: list[float] = []  # the same calls with no run in their context, the handler installed

    async def process(self, job: Job) -> ProcessorResult:
        text = "x" * (self.size - 20)
        began = time.process_time()
        for i in range(self.lines):
            log.info("line %d %s", i, text)
        self.inside.append((time.process_time() - began) / self.lines)
        token = current_job.set(None)  # as the worker's own code: not inside a run
        try:
            began = time.process_time()
            for i in range(self.lines):
                log.info("line %d %s", i, text)
            self.outside.append((time.process_time() - began) / self.lines)
        finally:
            current_job.reset(token)
        return ProcessorResult({})


async def run_jobs(dsn: str, job_type: str, processor: BaseProcessor, n: int) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        ids = await transitions.enqueue(conn, [JobCreate(job_type, {}) for _ in range(n)])
        worker = Worker(load_settings(DATABASE_URL=dsn, JOB_PROCESSOR_POLL_INTERVAL=0.05), dsn, {job_type: processor})
        began = time.monotonic()
        task = asyncio.create_task(worker.run())
        while await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = 'completed'",
                                  ids) < n:
            await asyncio.sleep(0.05)
        took = time.monotonic() - began
        worker.request_stop()
        await task
        return took
    finally:
        await conn.close()


async def bench_progress(dsn: str, seconds: float, jobs: int) -> None:
    print("progress")
    for label, processor, n in (("1 job, await job.progress", TightProgress(), 1),
                                (f"{jobs} jobs at once", TightProgress(), jobs),
                                ("1 job, from a thread, no await", ThreadProgress(), 1)):
        processor.seconds, processor.calls = seconds, []
        writes.clear()
        took = await run_jobs(dsn, "progress", processor, n)
        calls = sum(processor.calls)
        per_job = len(writes) / seconds
        print(f"  {label:<34} {calls / seconds / n:>11,.0f} calls/s per job   {len(writes):>3} writes in {took:.1f} s "
              f"({per_job:.1f}/s for all {n} job(s), {per_job / n:.2f}/s per job)")


async def bench_logs(dsn: str, lines: int) -> None:
    print("logs")
    processor = Lines()
    processor.lines, processor.inside, processor.outside = lines, [], []
    writes.clear()
    await run_jobs(dsn, "lines", processor, 1)
    conn = await asyncpg.connect(dsn)
    try:
        stored = await conn.fetchval("SELECT count(*) FROM job_logs")
    finally:
        await conn.close()
    outside = processor.outside[0]
    print(f"  a job logging {lines:,} lines: {processor.inside[0] * 1e6:.1f} µs of CPU per line inside a run, "
          f"{outside * 1e6:.1f} µs outside one; {len(writes)} write(s) for the job, {stored:,} line(s) stored")
    processor.lines, processor.size, processor.inside, processor.outside = 10_500, 1000, [], []
    writes.clear()
    took = await run_jobs(dsn, "lines", processor, 1)
    conn = await asyncpg.connect(dsn)
    try:
        kept = await conn.fetchval("SELECT count(*) FROM job_logs WHERE logger = 'bench.job'")
        note = await conn.fetchval("SELECT message FROM job_logs WHERE logger = 'jobdesk'")
    finally:
        await conn.close()
    print(f"  a job logging 10 MB: {took:.2f} s, {len(writes)} write(s), {kept - stored:,} lines kept, then: {note}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each progress job reports")
    parser.add_argument("--jobs", type=int, default=10, help="jobs reporting at once in the second progress run")
    parser.add_argument("--lines", type=int, default=1000, help="lines the logging job emits")
    args = parser.parse_args()
    if args.seconds <= 0 or args.jobs < 1 or args.lines < 1:
        raise SystemExit("--seconds must be above 0, --jobs and --lines at least 1")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # as a worker at LOG_LEVEL=WARNING
    with private_server() as server:
        await pg.build_template(server.dsn)
        async with fresh_database(server.dsn) as dsn:
            print("jobdesk progress and logs benchmark: one in-process worker, MAX_CONCURRENT_JOBS=10, "
                  "flush every 0.5 s", flush=True)
            await bench_progress(dsn, args.seconds, args.jobs)
            await bench_logs(dsn, args.lines)


if __name__ == "__main__":
    asyncio.run(main())
