"""What a new user meets in the first hour with the command line: cut values marked, a failed
job's traceback, short ids, a type no worker serves, and `--processors` as people type it."""

from __future__ import annotations

import json

import asyncpg

from jobdesk import JobClient, Status
from jobdesk.core.settings import load_settings
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
