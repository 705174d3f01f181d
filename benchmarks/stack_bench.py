"""Running jobs' stacks: how long `JobService.job_stack` takes to answer, per executor, with the
worker listening (a direct connection) and without LISTEN (behind PgBouncer in transaction mode,
where the worker finds the request with the query it makes every poll interval anyway).

    python benchmarks/stack_bench.py [--asks 20]

It starts its own embedded PostgreSQL (and a PgBouncer in front of it) in temporary folders,
runs a worker in this process with one job held still per executor, asks for each job's stack
`--asks` times one after another, and prints the median, 95th percentile and largest answer
time in ms. The worker polls at JOB_PROCESSOR_POLL_INTERVAL's default (0.1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from benchmarks.harness import private_server  # noqa: E402
from jobdesk.core.errors import JobNotRunning  # noqa: E402
from jobdesk.core.settings import load_settings  # noqa: E402
from jobdesk.runtime.worker import Worker  # noqa: E402
from jobdesk.service.jobs import JobService  # noqa: E402
from tests import pg  # noqa: E402
from tests.pgbouncer import PgBouncer  # noqa: E402
from tests.stack_processors import AsyncHold, ProcessHold, ThreadHold  # noqa: E402

INNER = {"async": "hold_async", "thread": "hold_in_thread", "process": "hold_in_process"}


async def measure(dsn: str, asks: int, release: Path) -> dict[str, list[float]]:
    settings = load_settings(DATABASE_URL=dsn)
    holds = {"async": AsyncHold(), "thread": ThreadHold(), "process": ProcessHold()}
    worker = Worker(settings, dsn, holds)
    running = asyncio.create_task(worker.run())
    jobs = await JobService.connect(dsn, settings=settings, source="cli", pool_size=2)
    times: dict[str, list[float]] = {}
    try:
        ids = {name: await jobs.enqueue(name, {"release": str(release)}) for name in holds}
        for name, job_id in ids.items():
            while not await started(jobs, job_id, INNER[name]):
                await asyncio.sleep(0.05)
            took = []
            for _ in range(asks):
                began = time.perf_counter()
                await jobs.job_stack(job_id)
                took.append((time.perf_counter() - began) * 1000)
            times[name] = took
    finally:
        release.touch()
        for hold in holds.values():
            if isinstance(hold, (AsyncHold, ThreadHold)):
                hold.release.set()
        worker.request_stop()
        await running
        await jobs.close()
    return times


async def started(jobs: JobService, job_id: str, inner: str) -> bool:
    """The job runs and its code has reached `inner` (a child process takes a moment to start)."""
    try:
        return inner in [f.function for f in (await jobs.job_stack(job_id)).frames]
    except JobNotRunning:
        return False


def report(path: str, times: dict[str, list[float]]) -> None:
    for name, took in times.items():
        ordered = sorted(took)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        print(f"{path:<28} {name:<8} median {statistics.median(took):7.1f} ms   p95 {p95:7.1f} ms   "
              f"max {max(took):7.1f} ms   ({len(took)} asks)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--asks", type=int, default=20)
    args = parser.parse_args()
    with private_server() as server, tempfile.TemporaryDirectory() as folder:
        bouncer = PgBouncer(server).start()
        try:
            async def everything() -> None:
                await pg.build_template(server.dsn)
                direct = await pg.create_test_database(server.dsn)
                report("direct (LISTEN)", await measure(direct, args.asks, Path(folder) / "a"))
                pooled = bouncer.url(await pg.create_test_database(server.dsn), declared=False)
                report("PgBouncer (no LISTEN, polls)", await measure(pooled, args.asks, Path(folder) / "b"))

            asyncio.run(everything())
        finally:
            bouncer.stop()


if __name__ == "__main__":
    main()
