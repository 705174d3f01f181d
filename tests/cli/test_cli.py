"""The `jobdesk` command line, run as a user runs it: a subprocess against a real database."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import asyncpg

from tests.helpers import run_cli, start_worker, wait_for


def one_line_error(proc, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode != 0, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


async def test_submit_show_and_list(dsn: str, conn: asyncpg.Connection) -> None:
    done = run_cli("submit", "echo", "--input", '{"n": 1}', "--json", dsn=dsn)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert job["status"] == "queued" and job["input_data"] == {"n": 1} and job["user_id"] == 1
    child = json.loads(run_cli("submit", "echo", "--depends-on", job["id"], "--pipeline", "p-1", "--json",
                               dsn=dsn).stdout)
    assert child["dependent_on_jobs"] == [job["id"]] and child["pipeline_id"] == "p-1"
    listed = json.loads(run_cli("jobs", "--pipeline", "p-1", "--json", dsn=dsn).stdout)
    assert [j["id"] for j in listed] == [child["id"]]
    shown = run_cli("show", job["id"], dsn=dsn)
    assert shown.returncode == 0 and job["id"] in shown.stdout and child["id"] in shown.stdout
    table = run_cli("jobs", "--status", "queued", dsn=dsn).stdout
    assert job["id"][-8:] in table and "queued" in table, "the short id is the random tail of the UUID"


async def test_actions_through_the_cli(dsn: str, conn: asyncpg.Connection) -> None:
    job_id = json.loads(run_cli("submit", "echo", "--json", dsn=dsn).stdout)["id"]
    assert run_cli("cancel", job_id, dsn=dsn).returncode == 0
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "cancelled"
    assert run_cli("retry", job_id, dsn=dsn).returncode == 0
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "queued"
    await conn.execute("UPDATE jobs SET status = 'waiting_approval' WHERE id = $1", job_id)
    rejected = run_cli("reject", job_id, "--reason", "not today", "--json", dsn=dsn)
    assert json.loads(rejected.stdout) == {"action": "reject", "jobs": [job_id]}
    row = await conn.fetchrow("SELECT status, error_message FROM jobs WHERE id = $1", job_id)
    assert row["status"] == "failed" and "not today" in row["error_message"]
    assert await conn.fetchval("SELECT source FROM audit_log WHERE action = 'reject'") == "cli"


async def test_bad_input_is_one_line_and_changes_nothing(dsn: str, conn: asyncpg.Connection) -> None:
    one_line_error(run_cli("submit", "echo", "--input", "{not json", dsn=dsn), "--input", "JSON")
    one_line_error(run_cli("submit", "echo", "--input", "[1, 2]", dsn=dsn), "JSON object")
    one_line_error(run_cli("submit", "echo", "--depends-on", "ghost", dsn=dsn), "ghost", "not a known job")
    one_line_error(run_cli("submit", "echo", "--user", "4242", dsn=dsn), "unknown user 4242")
    one_line_error(run_cli("show", "ghost", dsn=dsn), "no job with id ghost")
    one_line_error(run_cli("cancel", "ghost", dsn=dsn), "no job with id ghost")
    one_line_error(run_cli("jobs", "--status", "done", dsn=dsn), "unknown status 'done'")
    one_line_error(run_cli("reject", "x", dsn=dsn), "--reason")
    one_line_error(run_cli("frobnicate", dsn=dsn), "frobnicate")
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0
    job_id = json.loads(run_cli("submit", "echo", "--json", dsn=dsn).stdout)["id"]
    one_line_error(run_cli("approve", job_id, dsn=dsn), "cannot approve", "it is queued")
    one_line_error(run_cli("retry", job_id, dsn=dsn), "cannot retry", "it is queued")
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "queued"
    assert await conn.fetchval("SELECT count(*) FROM audit_log") == 0


def test_unreachable_database_says_where() -> None:
    proc = run_cli("jobs", dsn="postgresql://nobody@127.0.0.1:1/jobs_db?sslmode=disable")
    one_line_error(proc, "cannot connect", "jobs_db on 127.0.0.1:1")


def test_password_never_shown() -> None:
    proc = run_cli("jobs", dsn="postgresql://ops:s3cret-pw@127.0.0.1:1/jobs_db?sslmode=disable")
    one_line_error(proc, "127.0.0.1:1")
    assert "s3cret-pw" not in proc.stderr


def test_settings_errors_name_the_variable() -> None:
    for name, value in (("MAX_CONCURRENT_JOBS", "ten"), ("JOB_RETRY_INTERVALS", "10,soon"),
                        ("JOB_PROCESSOR_POLL_INTERVAL", "-1"), ("DB_POOL_SIZE", "1.5")):
        proc = run_cli("jobs", dsn="postgresql://x@127.0.0.1:1/x", **{name: value})
        one_line_error(proc, f"invalid setting {name}")
    proc = run_cli("jobs", dsn="postgresql://x@127.0.0.1:1/x", JOB_RETRY_INTERVALS="10,-5")
    one_line_error(proc, "JOB_RETRY_INTERVALS", "zero or more")


async def test_schema_must_be_migrated_on_a_given_database(template: str) -> None:
    from tests import pg

    bare = pg.with_database(template, "jdtest_bare")
    admin = await asyncpg.connect(pg.with_database(template, "postgres"))
    await admin.execute("DROP DATABASE IF EXISTS jdtest_bare")
    await admin.execute("CREATE DATABASE jdtest_bare")
    try:
        one_line_error(run_cli("jobs", dsn=bare), "jobdesk migrate")
        first = run_cli("migrate", dsn=bare)
        assert first.returncode == 0 and "001_jobs" in first.stdout
        again = run_cli("migrate", "--json", dsn=bare)
        assert json.loads(again.stdout)["applied"] == []
        assert run_cli("jobs", dsn=bare).returncode == 0
    finally:
        await admin.execute("DROP DATABASE IF EXISTS jdtest_bare WITH (FORCE)")
        await admin.close()


def test_worker_rejects_a_bad_processor_module(dsn: str) -> None:
    one_line_error(run_cli("worker", "--processors", "no_such_module_here", dsn=dsn), "no_such_module_here")
    one_line_error(run_cli("worker", "--processors", "json", dsn=dsn), "json has no PROCESSOR_MAP")
    # `--processors MODULE ...`: several modules after one flag, each loaded.
    one_line_error(run_cli("worker", "--processors", "cli_processors", "json", dsn=dsn), "json has no PROCESSOR_MAP")
    one_line_error(run_cli("api", "--no-auth", "--processors", "cli_processors", "json", dsn=dsn),
                   "json has no PROCESSOR_MAP")


async def test_worker_loads_processors_and_exits_0_on_sigterm(dsn: str, conn: asyncpg.Connection,
                                                            tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    job_id = json.loads(run_cli("submit", "test.record", "--json", dsn=dsn).stdout)["id"]
    other = json.loads(run_cli("submit", "sleep", "--input", '{"seconds": 1.5}', "--json", dsn=dsn).stdout)["id"]
    proc = start_worker(dsn, log_path=tmp_path / "worker.log", JOB_PROCESSOR_MODULES="cli_processors",
                        RUN_LOG=str(runs))
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs WHERE id = $1", other),
                       what="the sleep job to start")
        # The two jobs may sit in the two claim loops' different lanes: a job still unclaimed at
        # SIGTERM rightly stays queued, so the stop comes once the record job has run.
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the record job to run")
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        assert proc.wait(20) == 0, (tmp_path / "worker.log").read_text()
        assert time.monotonic() - t0 > 0.5, "the running job was allowed to finish"
    finally:
        if proc.poll() is None:
            proc.kill()
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "completed"
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", other) == "completed"
    assert runs.read_text().split()[0] == job_id


async def test_pipelines_cancel_pipeline_and_retry_downstream(dsn: str, conn: asyncpg.Connection) -> None:
    root = json.loads(run_cli("submit", "stage.a", "--pipeline", "p-9", "--input", '{"name": "nightly"}', "--json",
                              dsn=dsn).stdout)["id"]
    child = json.loads(run_cli("submit", "stage.b", "--pipeline", "p-9", "--depends-on", root, "--json",
                               dsn=dsn).stdout)["id"]
    table = run_cli("pipelines", dsn=dsn)
    assert table.returncode == 0 and "nightly" in table.stdout and "running" in table.stdout and "0/2" in table.stdout

    done = run_cli("cancel-pipeline", "p-9", dsn=dsn)
    assert done.returncode == 0 and "cancelled 2 job(s)" in done.stdout, done.stderr
    listed = json.loads(run_cli("pipelines", "--status", "cancelled", "--json", dsn=dsn).stdout)
    assert [(p["pipeline_id"], p["status"], p["total"]) for p in listed] == [("p-9", "cancelled", 2)]
    assert json.loads(run_cli("pipelines", "--status", "running", "--json", dsn=dsn).stdout) == []

    # Plain retry re-queues only the job named; --downstream brings its cancelled dependants back too.
    again = json.loads(run_cli("retry", root, "--downstream", "--json", dsn=dsn).stdout)
    assert sorted(again["jobs"]) == sorted([root, child])
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued'") == 2

    one_line_error(run_cli("cancel-pipeline", "ghost", dsn=dsn), "no pipeline with id ghost")
    one_line_error(run_cli("pipelines", "--status", "done", dsn=dsn), "--status")


async def test_worker_on_an_outdated_schema_says_so_and_claims_nothing(dsn: str, conn: asyncpg.Connection) -> None:
    """The schema is checked while the worker's pool opens: a pending migration stops the worker
    before its first claim, with one line, and leaves no registration behind."""
    queued = json.loads(run_cli("submit", "echo", "--json", dsn=dsn).stdout)["id"]
    last = await conn.fetchval("DELETE FROM jobdesk_migrations WHERE version = "
                               "(SELECT max(version) FROM jobdesk_migrations) RETURNING version")
    out = run_cli("worker", dsn=dsn, timeout=60)
    one_line_error(out, "the database schema is not up to date (1 migration(s) pending, from "
                   f"{last:03d}_", "run `jobdesk migrate`")
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", queued) == "queued"
    assert await conn.fetchval("SELECT count(*) FROM workers") == 0
