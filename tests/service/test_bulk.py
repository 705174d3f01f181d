"""Bulk retry, cancel, approve and reject by filter: dry-run counts, chunks of at most 1,000 with one audit row
each, keyset order while the table changes, and the CLI's `--all`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobdesk.cli import main as cli
from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import Status
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from jobdesk.store.jobs import JobFilter
from tests.cli.test_cli import one_line_error
from tests.helpers import run_cli


@pytest.fixture
async def service(dsn: str) -> AsyncIterator[JobService]:
    jobs = await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), source="cli", pool_size=2)
    yield jobs
    await jobs.close()


async def fill(conn: asyncpg.Connection, n: int, status: str, type: str = "pdf", prefix: str = "j") -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, error_message) "
                       "SELECT $4 || '-' || lpad(g::text, 5, '0'), $2, '{}', $3::text, "
                       "CASE WHEN $3::text = 'failed' THEN 'Boom ' || g END FROM generate_series(1, $1) g",
                       n, type, status, prefix)


FAILED = JobFilter(statuses=frozenset({Status.FAILED}))


async def test_dry_run_counts_only_jobs_the_action_is_legal_for(service: JobService, conn: asyncpg.Connection) -> None:
    await fill(conn, 5, "failed")
    await fill(conn, 3, "cancelled", prefix="c")
    await fill(conn, 4, "completed", prefix="d")
    await fill(conn, 2, "queued", type="mail", prefix="q")
    assert (await service.bulk_count("retry", JobFilter())).count == 8  # failed + cancelled
    assert (await service.bulk_count("retry", FAILED)).count == 5
    assert (await service.bulk_count("cancel", JobFilter())).count == 2
    assert (await service.bulk_count("cancel", FAILED)).count == 0  # nothing failed can be cancelled
    capped = await service.bulk_count("retry", JobFilter(), cap=6)
    assert (capped.count, capped.capped, capped.describe()) == (6, True, "6+")
    assert await conn.fetchval("SELECT count(*) FROM audit_log") == 0, "a dry run changes nothing"
    with pytest.raises(InvalidJob):
        await service.bulk_count("edit_input", JobFilter())
    with pytest.raises(InvalidJob):
        await service.bulk_apply("retry", JobFilter(), limit=1001)


async def test_retry_runs_in_chunks_with_one_audit_row_each(service: JobService, conn: asyncpg.Connection) -> None:
    await fill(conn, 2500, "failed")
    await fill(conn, 10, "failed", type="mail", prefix="m")
    result = await service.bulk("retry", JobFilter(statuses=frozenset({Status.FAILED}), type="pdf"))
    assert (result.count, result.chunks) == (2500, 3)
    rows = await conn.fetch("SELECT action, cardinality(job_ids) AS n, reason FROM audit_log ORDER BY id")
    assert [r["n"] for r in rows] == [1000, 1000, 500]
    assert {r["action"] for r in rows} == {"retry"}
    assert rows[0]["reason"] == "bulk: status failed, type pdf"
    counts = dict(await conn.fetch("SELECT type || ':' || status, count(*) FROM jobs GROUP BY 1"))
    assert counts == {"pdf:queued": 2500, "mail:failed": 10}


async def test_chunks_follow_the_keyset_while_the_table_changes(service: JobService, conn: asyncpg.Connection) -> None:
    await fill(conn, 30, "failed")
    count = await service.bulk_count("retry", FAILED)
    first = await service.bulk_apply("retry", FAILED, upto_seq=count.upto_seq, limit=10)
    assert first.picked == [f"j-{i:05d}" for i in range(1, 11)] and first.next_seq is not None
    # Meanwhile: a retried job fails again, a job ahead is retried by someone else, new failures arrive.
    await conn.execute("UPDATE jobs SET status = 'failed' WHERE id = 'j-00001'")
    await conn.execute("UPDATE jobs SET status = 'queued' WHERE id = 'j-00015'")
    await fill(conn, 5, "failed", prefix="late")
    rest: list[str] = []
    after = first.next_seq
    while after is not None:
        chunk = await service.bulk_apply("retry", FAILED, after_seq=after, upto_seq=count.upto_seq, limit=10)
        rest += chunk.picked
        after = chunk.next_seq
    assert rest == [f"j-{i:05d}" for i in range(11, 31) if i != 15], "each job once, only legal ones, none later"
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'j-00001'") == "failed"
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id LIKE 'late-%' AND status = 'failed'") == 5


async def test_cancel_all_cascades_and_a_user_sees_only_their_jobs(service: JobService,
                                                                   conn: asyncpg.Connection) -> None:
    parent, child = "p-1", "p-2"
    await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'pdf', '{}')", parent)
    await conn.execute("INSERT INTO jobs (id, type, input_data, dependent_on_jobs) "
                       "VALUES ($1, 'mail', '{}', $2)", child, [parent])
    other = await conn.fetchval("INSERT INTO users (name) VALUES ('other') RETURNING id")
    await conn.execute("INSERT INTO jobs (id, type, input_data, user_id) VALUES ('theirs', 'pdf', '{}', $1)", other)
    scoped = service.as_actor(service.actor, user_id=1)
    result = await scoped.bulk("cancel", JobFilter(type="pdf"))
    assert (result.count, result.changed) == (1, 2)
    statuses = dict(await conn.fetch("SELECT id, status FROM jobs"))
    assert statuses == {parent: "cancelled", child: "cancelled", "theirs": "queued"}


async def test_cli_retry_and_cancel_all(dsn: str, conn: asyncpg.Connection) -> None:
    await fill(conn, 1200, "failed")
    await fill(conn, 3, "queued", type="mail", prefix="q")
    dry = run_cli("retry", "--all", "--status", "failed", "--type", "pdf", "--dry-run", dsn=dsn)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip() == "would retry 1,200 job(s) matching status failed, type pdf"
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'failed'") == 1200
    done = run_cli("retry", "--all", "--type", "pdf", "--json", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"action": "retry", "filter": "type pdf", "dry_run": False, "count": 1200,
                                       "capped": False, "changed": 1200, "chunks": 2}
    assert await conn.fetchval("SELECT count(*) FROM audit_log WHERE source = 'cli'") == 2
    cancelled = run_cli("cancel", "--all", "--type", "mail", dsn=dsn)
    assert cancelled.stdout.strip() == "cancelled: 3 job(s) matching type mail, in 1 transaction(s)"

    proc = run_cli("retry", "j-00001", "--all", dsn=dsn)
    one_line_error(proc, "not both")
    assert proc.returncode == 2


async def test_cli_search_picks_what_the_console_search_would(dsn: str, conn: asyncpg.Connection) -> None:
    await fill(conn, 4, "failed", type="video.encode", prefix="v")
    await fill(conn, 2, "failed", type="video.thumb", prefix="t")
    await fill(conn, 3, "failed", type="mail", prefix="m")
    await conn.execute("UPDATE jobs SET error_message = 'timeout after 30 s' "
                       "WHERE id IN ('v-00001', 'v-00002', 't-00001')")
    query = 'type:video.* error:"timeout after"'
    dry = run_cli("retry", "--all", "--search", query, "--dry-run", dsn=dsn)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip() == "would retry 3 job(s) matching type video.*, error containing “timeout after”"
    done = json.loads(run_cli("retry", "--all", "--search", query, "--json", dsn=dsn).stdout)
    assert (done["count"], done["filter"]) == (3, "type video.*, error containing “timeout after”")
    queued = await conn.fetch("SELECT id FROM jobs WHERE status = 'queued' ORDER BY id")
    assert [r["id"] for r in queued] == ["t-00001", "v-00001", "v-00002"]
    note = await conn.fetchval("SELECT reason FROM audit_log WHERE action = 'retry'")
    assert note == "bulk: type video.*, error containing “timeout after”"


async def test_cli_approve_and_reject_all(dsn: str, conn: asyncpg.Connection) -> None:
    await fill(conn, 3, "waiting_approval", type="review.draft", prefix="a")
    await fill(conn, 2, "waiting_approval", type="review.final", prefix="b")
    await fill(conn, 2, "failed", type="review.draft", prefix="f")
    dry = run_cli("approve", "--all", "--search", "type:review.draft", "--dry-run", dsn=dsn)
    assert dry.stdout.strip() == "would approve 3 job(s) matching type review.draft"
    approved = run_cli("approve", "--all", "--search", "type:review.draft", dsn=dsn)
    assert approved.stdout.strip() == "approved: 3 job(s) matching type review.draft, in 1 transaction(s)"
    rejected = run_cli("reject", "--all", "--search", "review.final", "--reason", "too late", dsn=dsn)
    assert rejected.returncode == 0, rejected.stderr
    assert rejected.stdout.strip() == "rejected: 2 job(s) matching text “review.final”, in 1 transaction(s)"
    rows = await conn.fetch("SELECT id, status, error_message FROM jobs ORDER BY id")
    assert {r["id"]: r["status"] for r in rows} == {
        "a-00001": "completed", "a-00002": "completed", "a-00003": "completed",
        "b-00001": "failed", "b-00002": "failed", "f-00001": "failed", "f-00002": "failed"}
    assert {r["error_message"] for r in rows if r["id"].startswith("b")} == {"rejected: too late"}
    audit = await conn.fetchval("SELECT reason FROM audit_log WHERE action = 'reject'")
    assert audit == "too late (bulk: text “review.final”)"


@pytest.mark.parametrize("args", [["cancel"], ["retry", "--type", "pdf", "j-00001"],
                                  ["approve", "--search", "type:x", "j-00001"], ["reject", "--all"],
                                  ["cancel", "--all", "--search", "status:bogus"],
                                  ["retry", "--all", "--downstream"], ["cancel", "--all", "--status", "bogus"]])
def test_cli_refuses_malformed_bulk_commands(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jobdesk: error:"), err
