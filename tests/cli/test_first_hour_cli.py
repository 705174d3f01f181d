"""What a new user meets in the first hour with the command line: cut values marked, a failed
job's traceback, short ids, a type no worker serves, and `--processors` as people type it."""

from __future__ import annotations

import json

import asyncpg

from jobdesk import JobClient, Status
from jobdesk.core.settings import load_settings
from jobdesk.store.fleet import register
from tests.cli_processors import AlwaysFail
from tests.helpers import RunningWorker, run_cli


async def test_jobs_marks_a_cut_value_and_json_keeps_it_whole(dsn: str) -> None:
    long_type = "shop.tasks.send_confirmation_email"
    done = run_cli("submit", long_type, "--json", dsn=dsn)
    assert done.returncode == 0, done.stderr
    table = run_cli("jobs", dsn=dsn).stdout
    assert "shop.tasks.send_confirm…" in table and long_type not in table, table
    assert [j["type"] for j in json.loads(run_cli("jobs", "--json", dsn=dsn).stdout)] == [long_type]


async def test_show_prints_the_last_attempts_traceback_of_a_failed_job(dsn: str) -> None:
    async with await JobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2) as jobs:
        running = RunningWorker(dsn, {"test.fail": AlwaysFail()}, JOB_RETRY_INTERVALS=[0.05])
        record = await jobs.run("test.fail", {}, timeout=30)
        await running.stop()
    assert record.status == Status.FAILED
    shown = run_cli("show", record.id, dsn=dsn)
    assert shown.returncode == 0, shown.stderr
    assert "traceback of attempt #2:" in shown.stdout, shown.stdout
    after = shown.stdout.split("traceback of attempt #2:")[1]
    assert "Traceback (most recent call last):" in after
    assert "RuntimeError: this processor always fails" in after
    assert "in process" in after, "the frames, not only the message"


def test_a_file_name_given_for_a_module_gets_a_hint(dsn: str) -> None:
    proc = run_cli("worker", "--processors", "cli_processors.py", dsn=dsn)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "give the module's name, without .py: cli_processors" in proc.stderr


async def test_submit_takes_its_type_after_processors(dsn: str, conn: asyncpg.Connection) -> None:
    done = run_cli("submit", "--processors", "cli_processors", "test.record", "--input", '{"n": 1}', "--json",
                   dsn=dsn)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert job["type"] == "test.record" and job["input_data"] == {"n": 1}
    missing = run_cli("submit", "--processors", "cli_processors", dsn=dsn)
    assert missing.returncode == 2 and "required: TYPE" in missing.stderr
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 1


A = "0190aaaa-bbbb-7ccc-8ddd-eeee11112222"
B = "0190aaaa-bbbb-7ccc-8ddd-ffff11112222"  # the same short id as A


async def test_every_command_takes_the_short_id_and_a_part_of_the_id(dsn: str, conn: asyncpg.Connection) -> None:
    job_id = json.loads(run_cli("submit", "echo", "--json", dsn=dsn).stdout)["id"]
    short = run_cli("jobs", dsn=dsn).stdout.splitlines()[1].split()[0]
    assert short == job_id[-8:]
    shown = run_cli("show", short, dsn=dsn)
    assert shown.returncode == 0 and job_id in shown.stdout, shown.stderr
    assert run_cli("logs", short, "--json", dsn=dsn).returncode == 0
    assert run_cli("show", job_id[:13], dsn=dsn).returncode == 0, "a start of the id"
    child = run_cli("submit", "echo", "--depends-on", short, "--json", dsn=dsn)
    assert json.loads(child.stdout)["dependent_on_jobs"] == [job_id]
    cancelled = run_cli("cancel", short, dsn=dsn)
    assert cancelled.returncode == 0 and job_id in cancelled.stdout, cancelled.stderr
    assert run_cli("retry", short, dsn=dsn).returncode == 0
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "queued"
    await conn.execute("UPDATE jobs SET status = 'waiting_approval' WHERE id = $1", job_id)
    assert run_cli("approve", short, dsn=dsn).returncode == 0
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "completed"
    stack = run_cli("stack", short, dsn=dsn)  # found by its short id: the whole id in its answer
    assert (stack.returncode, stack.stderr) == (1, f"jobdesk: error: job {job_id} is not running (completed)\n")


async def test_an_ambiguous_id_is_one_line_and_changes_nothing(dsn: str, conn: asyncpg.Connection) -> None:
    await conn.executemany("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'echo', '{}')", [(A,), (B,)])
    for args in (("show", "11112222"), ("cancel", A, "11112222"), ("logs", "11112222"),
                 ("reject", "0190aaaa-bbbb", "--reason", "no"), ("open", "11112222", "--no-worker"),
                 ("stack", "11112222")):
        proc = run_cli(*args, dsn=dsn)
        assert proc.returncode == 1, (args, proc)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].endswith(" matches 2 jobs; give more of the id"), (args, lines)
    assert [r["status"] for r in await conn.fetch("SELECT status FROM jobs")] == ["queued", "queued"]
    assert await conn.fetchval("SELECT count(*) FROM audit_log") == 0
    too_short = run_cli("show", "1112222", dsn=dsn)
    assert too_short.returncode == 1 and "at least 8 characters" in too_short.stderr


async def test_submit_warns_of_a_type_no_live_worker_serves(dsn: str, conn: asyncpg.Connection) -> None:
    alone = run_cli("submit", "crnch", dsn=dsn)
    assert alone.returncode == 0 and alone.stderr == "", "no live worker at all: nothing to say"
    await register(conn, "w-1", "host", 1, 1, ["crunch"], "test")
    typo = run_cli("submit", "crnch", "--input", "{}", dsn=dsn)
    assert typo.returncode == 0 and typo.stdout.split()[1] == "queued", typo
    assert typo.stderr.strip().splitlines() == [
        "jobdesk: warning: no live worker serves crnch (did you mean crunch?); its jobs wait until a worker "
        "that serves it starts"]
    served = run_cli("submit", "crunch", dsn=dsn)
    assert served.returncode == 0 and served.stderr == ""
    as_json = run_cli("submit", "crnch", "--json", dsn=dsn)
    assert json.loads(as_json.stdout)["warnings"] == [typo.stderr.strip().removeprefix("jobdesk: warning: ")]
    assert json.loads(run_cli("submit", "crunch", "--json", dsn=dsn).stdout)["warnings"] == []
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 5
