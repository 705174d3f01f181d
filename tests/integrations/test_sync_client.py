"""SyncJobClient: JobClient's methods as plain calls, from a plain script and from a thread that
already runs an event loop; DatabaseUnavailable when the database is away; `connection=` given
anything but a supported connection is one TypeError naming the kinds."""

from __future__ import annotations

import asyncio
import inspect
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import asyncpg
import pytest

from jobdesk import DatabaseUnavailable, JobClient, JobCreate, JobRecord, SyncJobClient
from jobdesk.service.jobs import migrate_database
from jobdesk.service.sync_client import public_methods
from tests import pg
from tests.helpers import ROOT, cli_env, free_port, start_worker

pytestmark = pytest.mark.timeout(120)


def test_it_has_every_public_method_of_job_client_with_the_same_arguments() -> None:
    async_methods = public_methods(JobClient)
    sync_methods = public_methods(SyncJobClient)
    assert set(async_methods) <= set(sync_methods), set(async_methods) - set(sync_methods)
    for name in ("enqueue", "enqueue_many", "create_pipeline", "get_job", "wait", "run", "cancel", "retry",
                 "approve", "reject", "emit_event", "list_jobs", "wait_many"):
        assert inspect.signature(sync_methods[name]) == inspect.signature(async_methods[name]), name
    assert inspect.signature(SyncJobClient.connect) == inspect.signature(JobClient.connect)


async def test_it_works_inside_a_running_event_loop_without_touching_it(dsn: str) -> None:
    loop = asyncio.get_running_loop()
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        ticks += 1

    with SyncJobClient.connect(dsn) as jobs:  # this thread runs the test's loop, blocked while it waits
        first = jobs.enqueue("echo", {"n": 1}, priority=3)
        ids = jobs.enqueue_many([JobCreate("echo", {"n": 2}), JobCreate("echo", {"n": 3})])
        pipeline = jobs.create_pipeline([JobCreate("echo", {"n": 4})])
        record = jobs.get_job(first)
        loop.call_soon(tick)
        assert jobs.cancel([first]) == [first]
        assert jobs.get_job(first).status == "cancelled"
        assert [r.id for r in jobs.job_records(ids)] == ids
        assert jobs.emit_event("k", {"x": 1}) is True
    assert isinstance(record, JobRecord) and record.priority == 3 and record.input_data == {"n": 1}
    assert pipeline
    assert ticks == 0  # the loop of this thread did not run while the client worked
    await asyncio.sleep(0)
    assert ticks == 1


def test_a_plain_script_runs_a_job_through_a_worker(dsn: str, tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        from jobdesk import SyncJobClient
        with SyncJobClient.connect({dsn!r}) as jobs:
            record = jobs.run("echo", {{"message": "hi"}}, timeout=60)
            print(record.status, record.result_data)
    """))
    worker = start_worker(dsn, "--concurrency", "1")
    try:
        out = subprocess.run([sys.executable, str(script)], env=cli_env(dsn), capture_output=True, text=True,
                             timeout=90, cwd=ROOT)
    finally:
        worker.terminate()
        worker.wait(30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("completed"), out.stdout


def test_database_down_raises_database_unavailable() -> None:
    with pytest.raises(DatabaseUnavailable):
        SyncJobClient.connect(f"postgresql://postgres@127.0.0.1:{free_port()}/nothing")


def test_a_call_once_the_database_is_gone_raises_database_unavailable() -> None:
    server, root = pg.start_server()
    try:
        asyncio.run(migrate_database(server.dsn))
        jobs = SyncJobClient.connect(server.dsn)
        job_id = jobs.enqueue("echo", {})
        server.stop()
        with pytest.raises(DatabaseUnavailable):
            jobs.get_job(job_id)
        with pytest.raises(DatabaseUnavailable):
            jobs.enqueue("echo", {})
        jobs.close()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_an_unsupported_connection_is_one_type_error(dsn: str, conn: asyncpg.Connection) -> None:
    import psycopg

    async with await JobClient.connect(dsn) as jobs:
        for wrong in (object(), "postgresql://x", dsn.encode()):
            with pytest.raises(TypeError, match="asyncpg Connection.*psycopg 3.*SQLAlchemy.*Django"):
                await jobs.enqueue("echo", {}, connection=wrong)
        with psycopg.Connection.connect(dsn) as sync_conn:  # a sync connection is SyncJobClient's
            with pytest.raises(TypeError, match="SyncJobClient"):
                await jobs.enqueue("echo", {}, connection=sync_conn)
    with SyncJobClient.connect(dsn) as sync_jobs:
        with pytest.raises(TypeError, match="connection= takes"):
            sync_jobs.enqueue_many([JobCreate("echo", {})], connection=conn)  # an async one is JobClient's
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0


def test_import_jobdesk_loads_no_optional_driver() -> None:
    code = ("import sys, jobdesk; from jobdesk import JobClient, SyncJobClient; import jobdesk.integrations; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'psycopg', 'sqlalchemy', 'django'}))")
    out = subprocess.run([sys.executable, "-c", code], env=cli_env(None), capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
