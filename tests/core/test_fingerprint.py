"""Error fingerprints: the pure function, where the engine stores them, and the grouping."""

from __future__ import annotations

import asyncpg
import pytest

from jobdesk.core.fingerprint import NO_ERROR, fingerprint
from jobdesk.core.models import JobCreate
from jobdesk.store import failures as failure_queries
from jobdesk.store import transitions
from jobdesk.store.jobs import JobFilter, fetch_page


@pytest.mark.parametrize(("error", "expected"), [
    ("ConnectionError: upstream 'api-7.example.com' refused after 3 tries",
     "ConnectionError: upstream <str> refused after <n> tries"),
    ('KeyError: "user_42"', "KeyError: <str>"),
    ("TimeoutError: job 0190a7e1-1234-7abc-8def-0123456789ab timed out after 1.5 s",
     "TimeoutError: job <id> timed out after <n> s"),
    ("ValueError: object at 0x7f3a2b1c, digest deadbeef1234cafe", "ValueError: object at <hex>, digest <hex>"),
    ("RuntimeError: at 2026-12-01T12:00:05Z  on   port 5432", "RuntimeError: at <time> on port <n>"),
    ("ZeroDivisionError: division by zero\nTraceback (most recent call last): ...",
     "ZeroDivisionError: division by zero"),
    ("http2 stream v3 reset", "http2 stream v3 reset"),  # digits inside words stay
    ("", NO_ERROR),
    (None, NO_ERROR),
])
def test_fingerprint_normalises_what_changes(error: str | None, expected: str) -> None:
    assert fingerprint(error) == expected


def test_one_failure_repeated_has_one_fingerprint() -> None:
    prints = {fingerprint(f"ConnectionError: upstream 'host-{i}' refused after {i} tries (id {i:08x}a)")
              for i in range(50)}
    assert len(prints) == 1
    assert len(fingerprint("E: " + "x" * 1000)) == 300


async def claim(conn: asyncpg.Connection, job_type: str) -> transitions.Job:
    _, jobs = await transitions.complete_and_claim(conn, "w1", [job_type], 1)
    return jobs[0]


async def test_a_failed_attempt_stores_the_fingerprint_and_success_clears_it(conn: asyncpg.Connection) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("pdf", {})])
    job = await claim(conn, "pdf")
    await transitions.fail_attempt(conn, "w1", job, "OSError: disk 'sda1' full at 98%", "Traceback: …",
                                   intervals=[0])
    row = await conn.fetchrow("SELECT status, error_fingerprint FROM jobs WHERE id = $1", job_id)
    assert (row["status"], row["error_fingerprint"]) == ("queued", "OSError: disk <str> full at <n>%")
    attempt = await conn.fetchrow("SELECT error_fingerprint, job_type FROM job_attempts WHERE job_id = $1", job_id)
    assert (attempt["error_fingerprint"], attempt["job_type"]) == ("OSError: disk <str> full at <n>%", "pdf")
    job = await claim(conn, "pdf")
    await transitions.complete_and_claim(conn, "w1", [], 0, [(job, transitions.ProcessorResult({}))])
    assert await conn.fetchval("SELECT error_fingerprint FROM jobs WHERE id = $1", job_id) is None


async def test_groups_count_failed_jobs_and_recent_attempts(conn: asyncpg.Connection) -> None:
    ids = await transitions.enqueue(conn, [JobCreate("pdf" if i % 2 else "mail", {}) for i in range(6)])
    for i in range(4):  # four fail for good with the same error, varied values
        job = await claim(conn, "pdf" if i % 2 else "mail")
        await transitions.fail_attempt(conn, "w1", job, f"ConnectionError: host 'h{i}' refused after {i} tries",
                                       f"Traceback … h{i}", intervals=[])
    job = await claim(conn, "mail")  # one fails once and will be retried
    await transitions.fail_attempt(conn, "w1", job, "TimeoutError: took 31 s", "Traceback … took", intervals=[5])
    # An old row, from before fingerprints were stored: grouped under its first line.
    await conn.execute("UPDATE jobs SET status = 'failed', error_message = 'legacy 7 error\nmore' WHERE id = $1",
                       ids[5])
    # An attempt older than the window is not counted.
    await conn.execute("INSERT INTO job_attempts (job_id, attempt, outcome, error_message, error_fingerprint, "
                       "finished_at) VALUES ($1, 9, 'failed', 'TimeoutError: took 2 s', 'TimeoutError: took <n> s', "
                       "now() - interval '2 days')", ids[5])
    groups = {g.fingerprint: g for g in await failure_queries.failure_groups(conn)}
    refused = groups["ConnectionError: host <str> refused after <n> tries"]
    assert (refused.failed_jobs, refused.attempts, refused.types) == (4, 4, ["mail", "pdf"])
    assert refused.first_seen is not None and refused.last_seen is not None
    assert refused.first_seen <= refused.last_seen
    timeout = groups["TimeoutError: took <n> s"]
    assert (timeout.failed_jobs, timeout.attempts) == (0, 1)
    assert groups["legacy 7 error"].failed_jobs == 1
    assert list(groups)[0] == refused.fingerprint, "largest group first"

    # The group's filter finds its jobs in the job table, old rows too.
    page = await fetch_page(conn, refused.job_filter())
    assert {r.id for r in page.rows} == set(ids[:4])
    assert [r.id for r in (await fetch_page(conn, JobFilter(fingerprint="legacy 7 error"))).rows] == [ids[5]]
    sample = await failure_queries.failure_sample(conn, refused.fingerprint)
    assert sample is not None and sample.job_id == ids[3] and sample.traceback == "Traceback … h3"


async def test_reject_and_lost_workers_are_fingerprinted(conn: asyncpg.Connection) -> None:
    [a] = await transitions.enqueue(conn, [JobCreate("x", {})])
    await conn.execute("UPDATE jobs SET status = 'waiting_approval' WHERE id = $1", a)
    await transitions.reject(conn, [a], "wrong total 12.50", transitions.Actor("cli"))
    assert await conn.fetchval("SELECT error_fingerprint FROM jobs WHERE id = $1", a) == "rejected: wrong total <n>"
