"""Where `process` runs: what an async, a thread and a process run cost, and ten blocking jobs at once.

    python benchmarks/executors_bench.py [--jobs 5000] [--process-jobs 5000] [--quick]

It starts its own embedded PostgreSQL (durable settings) in a temporary folder, a fresh database
for each measurement, and runs an in-process worker with MAX_CONCURRENT_JOBS=10.

* blocking: ten jobs that each `time.sleep(1)` in a plain `def`, beside an async job that ticks
  every 50 ms for 1.5 s (the worker has 11 slots): the time until all ten are done (one after
  the other they take 10 s), and how many ticks the async job got (30 on a free loop), with the
  event loop's lag meanwhile.
* cost: N no-op jobs on each path: `async def` (the fast path), `async def` under a time limit,
  a plain `def` (a worker thread), and `executor = "process"` (the worker's pool of reused
  processes): jobs/s, and the worker's CPU per job (this process's CPU: the worker runs in it;
  the processes' own CPU is not in it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import LoopLag  # noqa: E402
from jobdesk import BaseProcessor, Job, ProcessorResult, SyncJob, SyncProcessor  # noqa: E402
from jobdesk.core.settings import load_settings  # noqa: E402
from jobdesk.embedded.server import EmbeddedServer  # noqa: E402
from jobdesk.runtime.worker import Worker  # noqa: E402
from tests import pg  # noqa: E402
from tests.runtime.offloop_processors import SleepsInThread, Ticks  # noqa: E402

TIMEOUT_S = 600.0


class AsyncNoop(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({})


class LimitedNoop(AsyncNoop):
    timeout = 60


class ThreadNoop(SyncProcessor):
    def process(self, job: SyncJob) -> ProcessorResult:
        return ProcessorResult({})


class ProcessNoop(ThreadNoop):
    executor = "process"


async def completed(conn: asyncpg.Connection, n: int) -> float:
    """Wait until n jobs are completed; return when (monotonic)."""
    start = time.monotonic()
    while (done := await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'completed'")) < n:
        if time.monotonic() - start > TIMEOUT_S:
            raise RuntimeError(f"{done} of {n} jobs completed after {TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.005 if n - done < 20 else 0.1)
    return time.monotonic()


async def on_worker(server: EmbeddedServer, processors: dict[str, BaseProcessor | SyncProcessor],
                    jobs: list[tuple[str, str]], concurrency: int = 10) -> tuple[float, float, dict[str, Any], LoopLag]:
    """Enqueue `jobs` (type, input JSON) and run them on an in-process worker: (seconds from the
    enqueue to the last completion, CPU seconds of this process, the results by type, loop lag)."""
    dsn = await pg.create_test_database(server.dsn)
    conn = await asyncpg.connect(dsn)
    worker = Worker(load_settings(DATABASE_URL=dsn, MAX_CONCURRENT_JOBS=concurrency, LOG_LEVEL="WARNING"), dsn,
                    processors)
    task = asyncio.create_task(worker.run())
    lag = LoopLag()
    try:
        while not await conn.fetchval("SELECT count(*) FROM workers WHERE state = 'running'"):
            await asyncio.sleep(0.05)
        cpu, start = time.process_time(), time.monotonic()
        lag.start()
        await conn.execute("INSERT INTO jobs (type, user_id, input_data) SELECT t, 1, i::jsonb "
                           "FROM unnest($1::text[], $2::text[]) AS j(t, i)", [t for t, _ in jobs], [i for _, i in jobs])
        end = await completed(conn, len(jobs))
        cpu = time.process_time() - cpu
        await lag.stop()
        rows = await conn.fetch("SELECT type, result_data FROM jobs")
        results = {r["type"]: json.loads(r["result_data"]) for r in rows}  # no JSON codec on this connection
    finally:
        worker.request_stop()
        await task
        await conn.close()
        await pg.drop_test_database(dsn)
    return end - start, cpu, results, lag


async def bench_blocking(server: EmbeddedServer) -> None:
    print("BLOCKING: ten plain-def jobs that time.sleep(1), beside an async job ticking every 50 ms for 1.5 s",
          flush=True)
    jobs = [("sleep.sync", '{"seconds": 1}')] * 10 + [("ticks", '{"seconds": 1.5}')]
    took, _, results, lag = await on_worker(server, {"sleep.sync": SleepsInThread(), "ticks": Ticks()}, jobs,
                                            concurrency=11)
    print(f"  all 11 done {took:.2f} s after the enqueue (one after the other: >= 10 s); the async job got "
          f"{results['ticks']['ticks']} ticks of 30; {lag.describe()}", flush=True)


async def bench_cost(server: EmbeddedServer, n: int, n_process: int) -> None:
    print(f"COST: no-op jobs on each path, MAX_CONCURRENT_JOBS=10 ({n:,} jobs; {n_process:,} in processes)",
          flush=True)
    paths: list[tuple[str, BaseProcessor | SyncProcessor, int]] = [
        ("async def (fast path)", AsyncNoop(), n), ("async def, timeout=60", LimitedNoop(), n),
        ("plain def (thread)", ThreadNoop(), n), ('executor = "process"', ProcessNoop(), n_process)]
    for label, processor, count in paths:
        took, cpu, _, _ = await on_worker(server, {"noop.x": processor}, [("noop.x", "{}")] * count)
        print(f"  {label:<24} {count / took:8,.0f} jobs/s   worker CPU {1000 * cpu / count:.3f} ms/job", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, help="no-op jobs per path (default 5,000)")
    parser.add_argument("--process-jobs", type=int, help="no-op jobs run in processes (default: as --jobs)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check that the benchmark works")
    args = parser.parse_args()
    n = args.jobs or (500 if args.quick else 5_000)
    n_process = args.process_jobs or n
    if min(n, n_process) < 1:
        raise SystemExit("--jobs and --process-jobs must be at least 1")
    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        print(f"jobdesk executors benchmark: one in-process worker, {os.cpu_count()} cores, durable commits",
              flush=True)
        await bench_blocking(server)
        await bench_cost(server, n, n_process)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
