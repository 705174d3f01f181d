"""The job list's reads on a large table (no Qt): pages and counts at 1,000,000 jobs, as the
HTTP API, the console and the CLI make them. Prints figures.

    python benchmarks/list_bench.py [--jobs 1000000]

Fills a private embedded PostgreSQL with `--jobs` jobs through plain INSERTs (mostly completed,
3 % failed, 0.3 % queued, running or waiting, of 4 types, each input holding an order id and a
user's plan), then times each read through
`JobService` as each front door connects it: the API's and the CLI's keep their plans across
calls (on one connection, so that they surely are), the console's plans each call for its values.
Last, `jobdesk export` of every job, as CSV and as JSON lines, into a sink that keeps nothing:
the time, and how much the process's peak memory grew (the export holds one page at a time).
"""

from __future__ import annotations

import argparse
import io
import resource
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import on_fresh_database
from benchmarks.metrics_bench import timed
from jobdesk.api.server import connect_service
from jobdesk.core.models import Status
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from jobdesk.store.jobs import JobFilter
from jobdesk.store.search_syntax import parse_search

CHUNK = 250_000


async def fill(dsn: str, jobs: int) -> None:
    t0 = time.perf_counter()
    conn = await asyncpg.connect(dsn)
    try:
        for first in range(1, jobs + 1, CHUNK):
            await conn.execute("""
                INSERT INTO jobs (type, input_data, status, error_message, updated_at)
                SELECT 'type.' || (g % 4),
                       jsonb_build_object('order_id', g, 'user', jsonb_build_object('plan',
                           CASE WHEN g % 10007 = 0 THEN 'enterprise'
                                ELSE (ARRAY['free', 'pro', 'business'])[1 + g % 3] END)), s.status,
                       CASE WHEN s.status = 'failed' THEN 'Error ' || g END, now()
                  FROM generate_series($1::int, $2::int) g
                 CROSS JOIN LATERAL (
                    SELECT CASE WHEN g % 333 = 0
                                THEN (ARRAY['queued', 'in_progress', 'waiting_approval'])[1 + g / 333 % 3]
                                WHEN g % 33 = 0 THEN 'failed' ELSE 'completed' END AS status) s""",
                               first, min(jobs, first + CHUNK - 1))
        await conn.execute("VACUUM ANALYZE jobs")
    finally:
        await conn.close()
    print(f"filled {jobs:,} jobs in {time.perf_counter() - t0:.1f} s", flush=True)


async def reads(service: JobService) -> None:
    _, cursor = await service.job_records_page(JobFilter(), limit=50)
    failed = JobFilter(statuses=frozenset({Status.FAILED}))
    by_type = JobFilter(type="type.1")
    await timed("API: newest 50 (GET /api/jobs)", lambda: service.job_records_page(JobFilter(), limit=50))
    await timed("API: the next 50 (?cursor=)", lambda: service.job_records_page(JobFilter(), before_seq=cursor,
                                                                               limit=50))
    await timed("API: newest 50 of a type", lambda: service.job_records_page(by_type, limit=50))
    await timed("API: newest 50 failed", lambda: service.job_records_page(failed, limit=50))
    await timed("/metrics: queued, running, failed per type", lambda: service.active_counts())
    await timed("console: newest 200", lambda: service.job_page(JobFilter()))
    await timed("console: oldest 200", lambda: service.job_page(JobFilter(), descending=False))
    await timed("console: newest 200 of a type", lambda: service.job_page(by_type))
    await timed("console: status counts", lambda: service.status_counts(JobFilter()))
    await timed("console: status counts of a type", lambda: service.status_counts(by_type))
    await timed("CLI: jobdesk jobs (newest 50)", lambda: service.list_jobs(limit=50))
    await input_searches(service)


async def input_searches(service: JobService) -> None:
    """`input.PATH:VALUE` terms (sql/030's GIN index): one job, ~100 jobs, a third of the jobs."""
    one = parse_search("input.order_id:424242").filter
    rare = parse_search("input.user.plan:enterprise").filter
    common = parse_search("input.user.plan:business").filter
    rare_failed = parse_search("status:failed input.user.plan:enterprise").filter
    await timed("API: ?q=input.order_id:424242 (1 job)", lambda: service.job_records_page(one, limit=50))
    await timed("API: ?q=input.user.plan:enterprise (~100)", lambda: service.job_records_page(rare, limit=50))
    await timed("API: ?q=input.user.plan:business (a third)", lambda: service.job_records_page(common, limit=50))
    await timed("console: input.order_id:424242, page", lambda: service.job_page(one))
    await timed("console: input.order_id:424242, counts", lambda: service.status_counts(one))
    await timed("console: input.user.plan:enterprise, page", lambda: service.job_page(rare))
    await timed("console: input.user.plan:enterprise, counts", lambda: service.status_counts(rare))
    await timed("console: input.user.plan:business, page", lambda: service.job_page(common))
    await timed("console: status:failed input.user.plan:enterprise", lambda: service.job_page(rare_failed))


class NullSink(io.TextIOBase):
    """Where an export's text goes in the benchmark: counted, not kept."""

    def __init__(self) -> None:
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)


async def export_all(service: JobService, fmt: str) -> None:
    """`jobdesk export` of every job: the time, and how much this process's peak memory grew."""
    sink = NullSink()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    count = await service.export_jobs(JobFilter(), fmt, sink)
    took = time.perf_counter() - t0
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    print(f"  export --format {fmt}: {count:,} jobs, {sink.chars / 1e6:,.0f} MB of text in {took:.1f} s "
          f"({count / took:,.0f} jobs/s); peak memory grew {grew / 1024:,.1f} MB", flush=True)


async def measure(dsn: str, args: argparse.Namespace) -> None:
    await fill(dsn, args.jobs)
    settings = load_settings(DATABASE_URL=dsn)
    services = (("the API's service (plans kept, on the indexes)", lambda: connect_service(settings, pool_size=1)),
                ("the console's (each call planned)",
                 lambda: JobService.connect(dsn, settings=settings, pool_size=1, plan_each_call=True)),
                ("the CLI's (plans kept)", lambda: JobService.connect(dsn, settings=settings, pool_size=1)))
    for label, connect in services:
        service = await connect()
        print(f"{label}:", flush=True)
        try:
            await reads(service)
        finally:
            await service.close()
    service = await JobService.connect(dsn, settings=settings, pool_size=1)
    print("the CLI's export (keyset pages of 1,000):", flush=True)
    try:
        for fmt in ("csv", "jsonl"):
            await export_all(service, fmt)
    finally:
        await service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    args = parser.parse_args()
    on_fresh_database(lambda dsn: measure(dsn, args))


if __name__ == "__main__":
    main()
