"""Browsing jobs on the server: filters, every sort order paged by keyset, capped counts, and the
NOTIFY of changed ids that drives live views."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from jobdesk.core.models import Status
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from jobdesk.store.jobs import SORT_KEYS, JobFilter, fetch_page, fetch_rows, status_counts
from tests.helpers import reads_of_jobs

TYPES = ["video.render", "email", "echo", "resize_50%"]


async def seed(conn: asyncpg.Connection, n: int = 240) -> None:
    rng = random.Random(7)
    users = [1] + [await conn.fetchval("INSERT INTO users DEFAULT VALUES RETURNING id") for _ in range(2)]
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(n):
        status = rng.choice(list(Status))
        await conn.execute(
            "INSERT INTO jobs (id, type, user_id, pipeline_id, input_data, status, error_message, retry_count, "
            "created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            f"job-{i:04d}", rng.choice(TYPES), rng.choice(users), rng.choice([None, "p-a", "p-b"]),
            {"n": i, "note": "under_score" if i % 50 == 0 else "plain"}, str(status),
            f"Boom {i}\nTraceback ..." if status == Status.FAILED else None, rng.randint(0, 3),
            base + timedelta(minutes=i), base + timedelta(minutes=rng.randint(0, 20)))


@contextlib.asynccontextmanager
async def read_service(dsn: str, plan_each_call: bool) -> AsyncIterator[JobService]:
    """A service on one connection that keeps its plans (the API's) or plans each call (the console's)."""
    service = await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=1,
                                       plan_each_call=plan_each_call)
    try:
        yield service
    finally:
        await service.close()


def expected_order(rows: list[asyncpg.Record], column: str, descending: bool) -> list[str]:
    def key(r: asyncpg.Record) -> tuple:
        value = r[column]
        return (value is not None, value if value is not None else 0, r["seq"])
    return [r["id"] for r in sorted(rows, key=key, reverse=descending)]


@pytest.mark.parametrize("sort", sorted(SORT_KEYS))
@pytest.mark.parametrize("descending", [True, False])
async def test_every_sort_pages_through_every_row_once_in_order(conn: asyncpg.Connection, sort: str,
                                                                 descending: bool) -> None:
    await seed(conn)
    filt = JobFilter(statuses=frozenset({Status.QUEUED, Status.FAILED, Status.COMPLETED}))
    seen: list[str] = []
    after = None
    while True:
        page = await fetch_page(conn, filt, sort=sort, descending=descending, after=after, limit=17)
        seen += [r.id for r in page.rows]
        if not page.has_more:
            break
        after = page.rows[-1].keyset(sort)
    rows = await conn.fetch(f"SELECT id, seq, {SORT_KEYS[sort]} FROM jobs "
                            "WHERE status IN ('queued', 'failed', 'completed')")
    assert seen == expected_order(rows, SORT_KEYS[sort], descending)


async def test_filters(conn: asyncpg.Connection) -> None:
    await seed(conn)

    async def ids(**kwargs: object) -> set[str]:
        page = await fetch_page(conn, JobFilter(**kwargs), limit=1000)  # type: ignore[arg-type]
        return {r.id for r in page.rows}

    async def sql_ids(where: str, *args: object) -> set[str]:
        return {r["id"] for r in await conn.fetch(f"SELECT id FROM jobs WHERE {where}", *args)}

    assert await ids(type="email") == await sql_ids("type = 'email'")
    assert await ids(pipeline_id="p-a", user_id=1) == await sql_ids("pipeline_id = 'p-a' AND user_id = 1")
    since = datetime(2026, 1, 1, 1, tzinfo=UTC)
    until = datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert await ids(created_from=since, created_to=until) == {f"job-{i:04d}" for i in range(60, 120)}
    assert await ids(search="JOB-0042") == {"job-0042"}
    failed = await sql_ids("status = 'failed'")
    assert await ids(search="boom") == failed, "search looks in the error"
    assert await ids(search="under_score") == {f"job-{i:04d}" for i in range(0, 240, 50)}, "and in the input"
    assert await ids(search="50%") == await sql_ids("type = 'resize_50%'"), "% is matched literally"
    page = await fetch_page(conn, JobFilter(statuses=frozenset({Status.FAILED})), limit=5)
    assert all(r.error_line and "\n" not in r.error_line for r in page.rows)


async def test_capped_status_counts(conn: asyncpg.Connection) -> None:
    await seed(conn)
    exact = await conn.fetch("SELECT status, count(*) AS n FROM jobs WHERE type = 'email' GROUP BY status")
    counts = await status_counts(conn, JobFilter(type="email", statuses=frozenset({Status.QUEUED})))
    assert {s: n for s, n in counts.counts.items() if n} == {Status(r["status"]): r["n"] for r in exact}
    assert all(counts.exact(s) for s in Status)
    capped = await status_counts(conn, JobFilter(), cap=5)
    assert set(capped.counts.values()) == {5} and not capped.exact(Status.QUEUED)


async def test_fetch_rows_sees_current_values(conn: asyncpg.Connection) -> None:
    await seed(conn, 3)
    await conn.execute("UPDATE jobs SET status = 'completed' WHERE id = 'job-0001'")
    rows = {r.id: r for r in await fetch_rows(conn, ["job-0001", "job-0002", "gone"])}
    assert set(rows) == {"job-0001", "job-0002"} and rows["job-0001"].status == Status.COMPLETED


async def test_changes_are_notified_per_statement(conn: asyncpg.Connection, dsn: str) -> None:
    listener = await asyncpg.connect(dsn)
    heard: list[str] = []
    await listener.add_listener("jobdesk_job_changes", lambda *args: heard.append(args[-1]))
    try:
        await conn.execute("INSERT INTO jobs (id, type, input_data) "
                           "VALUES ('n-1', 'echo', '{}'), ('n-2', 'echo', '{}')")
        await conn.execute("UPDATE jobs SET status = 'cancelled' WHERE id = 'n-2'")
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'echo', '{}' FROM generate_series(1, 400)")
        await conn.execute("DELETE FROM jobs WHERE id = 'n-1'")
        for _ in range(100):
            if len(heard) >= 4:
                break
            await asyncio.sleep(0.02)
    finally:
        await listener.close()
    assert heard == ["n-1,n-2", "n-2", "*", "n-1"]


async def test_pages_and_counts_walk_the_status_index_on_a_large_table(conn: asyncpg.Connection, dsn: str) -> None:
    """`jobs` has no index on `seq` alone: a page newest first read every row and sorted them
    (400 ms at 1,000,000 jobs), and a count of a rare status, planned for a status bound from a
    list, read the whole table. Both walk the status index now, a status at a time, through a
    service that keeps its plans (the API's) as through the console's. Each status's jobs are
    interleaved with the others', so the merge is checked too."""
    await conn.execute("INSERT INTO jobs (id, type, input_data, status) SELECT 'old-' || g, "
                       "(ARRAY['a', 'b'])[1 + g % 2], '{}', 'completed' FROM generate_series(1, 20000) g")
    statuses = [Status.QUEUED, Status.FAILED, Status.COMPLETED, Status.IN_PROGRESS, Status.WAITING_APPROVAL]
    for i in range(60):
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ($1, $2, '{}', $3)",
                           f"new-{i:02d}", "ab"[i % 2], str(statuses[i % len(statuses)]))
    await conn.execute("ANALYZE jobs")
    newest = [r["id"] for r in await conn.fetch("SELECT id FROM jobs ORDER BY seq DESC LIMIT 100")]
    for plan_each_call in (False, True):
        label = f"plan_each_call={plan_each_call}"
        async with read_service(dsn, plan_each_call) as service:
            before = await reads_of_jobs(conn, service.pool)
            for _ in range(7):  # past the 5 calls after which PostgreSQL may keep one plan
                first, cursor = await service.job_records_page(JobFilter(), limit=50)
                rest, _ = await service.job_records_page(JobFilter(), before_seq=cursor, limit=50)
                assert [r.id for r in first + rest] == newest
                page = await service.job_page(JobFilter(type="b"), limit=20)
                assert [r.id for r in page.rows] == [i for i in newest if int(i[-1]) % 2][:20]
                oldest = await service.job_page(JobFilter(), descending=False, limit=3)
                assert [r.id for r in oldest.rows] == ["old-1", "old-2", "old-3"]
                assert [r.id for r in await service.list_jobs(status=Status.FAILED, limit=2)] == ["new-56", "new-51"]
            paged = await reads_of_jobs(conn, service.pool)
            for _ in range(7):
                counts = await service.status_counts(JobFilter(type="a"))
                assert counts.counts[Status.QUEUED] == 6 and counts.counts[Status.COMPLETED] == 10_000
                active = await service.active_counts()
                assert active[("a", "queued")] == 6 and active[("b", "failed")] == 6
            counted = await reads_of_jobs(conn, service.pool)
        # Each page reads at most its length plus one per status.
        assert paged.seq_scans == before.seq_scans, label
        assert paged.rows - before.rows < 7 * 1_000, label
        # Counting the completed jobs of type a stops at 10,000 of them, about 20,000 rows read
        # either way; a rare status read every row (20,060) for each count, 8 of them a round.
        assert counted.rows - paged.rows < 7 * 25_000, label


async def test_running_jobs_are_read_without_the_status_index(conn: asyncpg.Connection, dsn: str) -> None:
    """A claim writes no entry to jobs_status_idx (sql/026): running jobs are read from
    jobs_in_progress_worker_idx. Their page in enqueue order, a filter of several statuses with
    running among them, and the counts per status still read only the jobs they return."""
    indexdef = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_status_idx'")
    assert indexdef.endswith("WHERE ((status)::text <> 'in_progress'::text)")
    await conn.execute("INSERT INTO jobs (id, type, input_data, status) SELECT 'old-' || g, 'a', '{}', "
                       "'completed' FROM generate_series(1, 20000) g")
    for i in range(60):
        await conn.execute("INSERT INTO jobs (id, type, input_data, status, worker_id) VALUES ($1, 'a', '{}', $2, $3)",
                           f"new-{i:02d}", "in_progress" if i % 2 else "queued", "w-1" if i % 2 else None)
    await conn.execute("ANALYZE jobs")
    running = [f"new-{i:02d}" for i in range(59, 0, -2)]
    unfinished = {f"new-{i:02d}" for i in range(60)}
    for plan_each_call in (False, True):
        label = f"plan_each_call={plan_each_call}"
        async with read_service(dsn, plan_each_call) as service:
            before = await reads_of_jobs(conn, service.pool)
            for _ in range(7):  # past the 5 calls after which PostgreSQL may keep one plan
                assert [r.id for r in await service.list_jobs(status=Status.IN_PROGRESS, limit=10)] == running[:10]
                both = JobFilter(statuses=frozenset({Status.QUEUED, Status.IN_PROGRESS}))
                page = await service.job_page(both, sort="updated", limit=100)
                assert {r.id for r in page.rows} == unfinished
            paged = await reads_of_jobs(conn, service.pool)
            for _ in range(7):
                counts = await service.status_counts(JobFilter())
                assert (counts.counts[Status.IN_PROGRESS], counts.counts[Status.QUEUED]) == (30, 30)
            counted = await reads_of_jobs(conn, service.pool)
        # The pages read the unfinished jobs only: 30 running, then 60 unfinished, a round; or,
        # as they are all of jobs_live (sql/041), that partition whole for each: 120 a round.
        assert paged.seq_scans == before.seq_scans, label
        assert paged.rows - before.rows <= 7 * 120, label
        # The counts stop at 10,000 completed jobs, and read the running and queued ones once.
        assert counted.rows - paged.rows < 7 * 10_300, label
