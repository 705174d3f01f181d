"""Behind PgBouncer in transaction pooling mode: the engine, the CLI and the worker work through
it, LISTEN goes to DATABASE_LISTEN_URL or is replaced by polling, and a deaf listener is noticed."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from jobdesk.cli import main as cli
from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.settings import load_settings
from jobdesk.processors.builtin import EchoProcessor, SleepProcessor
from jobdesk.service.jobs import JobService
from jobdesk.store.db import is_pooled, know_pooler
from jobdesk.store.listener import Listener, ListenerDeaf
from tests import pg
from tests.helpers import RunningWorker, assert_no_job_lost, run_cli, start_worker, wait_for
from tests.pgbouncer import SERVER_POOL_SIZE, PgBouncer

POLLING = "DATABASE_LISTEN_URL is not set, so there is no LISTEN"


@pytest.fixture
def pooled(dsn: str, pgbouncer: PgBouncer) -> str:
    """The test database through PgBouncer, as a plain URL: jobdesk finds the pooler by itself."""
    return pgbouncer.url(dsn, declared=False)


async def status(conn: asyncpg.Connection, *ids: str) -> set[str]:
    return {r["status"] for r in await conn.fetch("SELECT status FROM jobs WHERE id = ANY($1::text[])", list(ids))}


class Recorder(BaseProcessor):
    """Counts its runs per job, for every worker that shares it."""

    def __init__(self, runs: Counter[str], *, fail_first: bool = False) -> None:
        self.runs = runs
        self.fail_first = fail_first

    async def process(self, job: Job) -> ProcessorResult:
        self.runs[job.id] += 1
        if self.fail_first and job.attempt == 1:
            raise RuntimeError("first attempt fails")
        if job.input_data.get("fan_out"):
            return ProcessorResult({"n": 1}, next_jobs=[JobCreate("rec", {}) for _ in range(3)])
        return ProcessorResult({"attempt": job.attempt})


async def test_service_through_the_pooler(pooled: str, dsn: str, pgbouncer: PgBouncer) -> None:
    """More clients than server sessions, no prepared-statement clash, no refused startup
    parameter; the statement timeout holds, and the pool is fine after it."""
    # The timeout counts from the client, so it includes a wait for a server session: it leaves
    # the 400 reads room for that wait on a busy machine, and still ends the sleep below.
    settings = load_settings(DATABASE_URL=pooled, JOB_STATEMENT_TIMEOUT=1.5)
    async with await JobService.connect(pooled, settings=settings, pool_size=SERVER_POOL_SIZE * 3) as jobs:
        ids = await jobs.enqueue_many([JobCreate("echo", {"n": i}) for i in range(20)])

        async def reads(i: int) -> None:
            for _ in range(10):
                assert (await jobs.get_job(ids[i])).input_data == {"n": i}
                await jobs.job_detail(ids[i])

        await asyncio.gather(*(reads(i) for i in range(20)))
        with pytest.raises(asyncpg.QueryCanceledError, match="statement timeout"):
            await jobs.pool.fetchval("SELECT pg_sleep(5)")
        assert len(await jobs.list_jobs(status="queued")) == 20

    assert is_pooled(pooled) and not is_pooled(dsn)
    # Said outright, nothing is probed: ?pgbouncer=true works the same; ?pgbouncer=false makes
    # PgBouncer refuse the statement_timeout startup parameter, in one line that says why.
    declared = pgbouncer.url(dsn)
    async with await JobService.connect(declared, settings=settings) as jobs:
        assert (await jobs.get_job(ids[0])).input_data == {"n": 0}
    with pytest.raises(DatabaseUnavailable, match=r"unsupported startup parameter.*\?pgbouncer=false"):
        await JobService.connect(declared.replace("pgbouncer=true", "pgbouncer=false"), settings=settings)


async def test_a_pooler_is_found_by_the_backend_id_the_handshake_gave(dsn: str, pgbouncer: PgBouncer) -> None:
    """PgBouncer makes up the backend id of its cancel keys: the first connection to a URL
    compares it with PostgreSQL's own, and the answer is kept for the process."""
    url = pgbouncer.url(dsn, declared=False) + "&application_name=probe"  # a URL no test used yet
    assert not is_pooled(url), "not known before its first connection"
    assert await know_pooler(url) and is_pooled(url)
    assert not await know_pooler(dsn) and not is_pooled(dsn)
    assert await know_pooler(pgbouncer.url(dsn)), "?pgbouncer=true, without a probe"
    with pytest.raises(DatabaseUnavailable, match="cannot connect"):
        await know_pooler(f"postgresql://postgres@127.0.0.1:{pgbouncer.port}/no_such_database", timeout=5)


async def test_api_follows_jobs_through_the_pooler_without_listen(pooled: str, conn: asyncpg.Connection) -> None:
    """`jobdesk api` on a plain PgBouncer URL, without DATABASE_LISTEN_URL, cannot LISTEN: it
    says so once, and a long-poll and an SSE stream over its socket still see changes made by
    plain SQL within a second."""
    import httpx

    from tests.api.test_api_server import start_api, stop

    proc, url = await asyncio.to_thread(start_api, pooled, "--no-auth")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            job = (await client.post("/api/jobs", json={"type": "t", "input_data": {}})).json()
            seen: list[tuple[float, str]] = []

            async def follow() -> None:
                async with client.stream("GET", f"/api/jobs/{job['id']}/events") as resp:
                    async for line in resp.aiter_lines():
                        if line.startswith("data: "):
                            seen.append((time.monotonic(), json.loads(line[6:])["status"]))

            stream = asyncio.create_task(follow())
            waiting = asyncio.create_task(client.get(f"/api/jobs/{job['id']}?wait=20"))
            await wait_for(lambda: asyncio.sleep(0, bool(seen)), what="the stream's first event")
            await asyncio.sleep(0.3)
            assert not waiting.done()
            changed_at = time.monotonic()
            await conn.execute("UPDATE jobs SET status = 'in_progress', updated_at = now() WHERE id = $1", job["id"])
            assert (await waiting).json()["status"] == "in_progress"
            answered_s = time.monotonic() - changed_at
            await asyncio.sleep(0.3)
            finished_at = time.monotonic()
            await conn.execute("UPDATE jobs SET status = 'completed', updated_at = now() WHERE id = $1", job["id"])
            await asyncio.wait_for(stream, 10)
    finally:
        assert await asyncio.to_thread(stop, proc) == 0
    output = proc.stdout.read() if proc.stdout else ""
    assert answered_s < 1.0
    assert [s for _, s in seen] == ["queued", "in_progress", "completed"], output
    assert seen[1][0] - changed_at < 1.0 and seen[2][0] - finished_at < 1.0
    assert output.count(POLLING) == 1 and "waiting requests read" in output, output
    assert "Traceback" not in output and "prepared statement" not in output, output


async def test_engine_through_the_pooler(pooled: str, conn: asyncpg.Connection,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """Plain-SQL enqueue, a pipeline, retries, cancelling a running job, and two workers that run
    each job once, every query through PgBouncer; without LISTEN each worker says once that it polls."""
    caplog.set_level(logging.INFO, logger="jobdesk.worker")
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'rec', '{}' FROM generate_series(1, 300)")
    runs: Counter[str] = Counter()
    flaky_runs: Counter[str] = Counter()
    processors: dict[str, Any] = {"rec": Recorder(runs), "flaky": Recorder(flaky_runs, fail_first=True),
                                  "echo": EchoProcessor(), "sleep": SleepProcessor()}
    fast = {"JOB_HEARTBEAT_INTERVAL": 0.3, "MAX_CONCURRENT_JOBS": 4}
    workers = [RunningWorker(pooled, processors, **fast), RunningWorker(pooled, processors, **fast)]
    jobs = await JobService.connect(pooled, settings=load_settings(DATABASE_URL=pooled))
    try:
        first = JobCreate("rec", {"fan_out": True})
        then = JobCreate("echo", {"x": 1}, dependent_on_jobs=[first.id])
        pipeline = await jobs.create_pipeline([first, then])
        flaky = await jobs.enqueue("flaky", {})
        long = await jobs.enqueue("sleep", {"seconds": 30})
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs WHERE id = $1", long),
                       what="the long job to start")
        assert await jobs.cancel([long]) == [long]
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 0 FROM jobs WHERE status NOT IN "
                                             "('completed', 'cancelled', 'failed')"),
                       timeout=30, what="every job to finish")
    finally:
        await jobs.close()
        for worker in workers:
            await worker.stop()
    assert await status(conn, long) == {"cancelled"}
    assert await conn.fetchval("SELECT outcome FROM job_attempts WHERE job_id = $1", long) == "cancelled"
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE pipeline_id = $1 AND status = 'completed'",
                               pipeline) == 5, "the two stages and the three next jobs"
    assert await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1", then.id) == {"x": 1}
    row = await conn.fetchrow("SELECT status, retry_count, attempts FROM jobs WHERE id = $1", flaky)
    assert (row["status"], row["retry_count"], row["attempts"]) == ("completed", 1, 2)
    assert len(runs) == 304 and set(runs.values()) == {1}, "each job ran once, across two workers"
    assert all(w.worker.stats["completed"] > 0 for w in workers), "both workers took a share"
    await assert_no_job_lost(conn, 307)
    said = [r.getMessage() for r in caplog.records if POLLING in r.getMessage()]
    assert len(said) == 2 and "polling for new jobs" in said[0], "once per worker"


async def in_process(*args: str) -> str:
    """`jobdesk ARGS` run by the CLI's own main() in a thread; its stdout, or a failed assertion."""
    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(args))
        return code, out.getvalue(), err.getvalue()

    code, out, err = await asyncio.to_thread(run)
    assert code == 0, f"jobdesk {' '.join(args)}: {err}"
    return out


async def test_cli_and_worker_process_through_the_pooler(template: str, pgbouncer: PgBouncer, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`jobdesk migrate` on an empty database, then every command and `jobdesk worker`, all
    through PgBouncer."""
    admin = await asyncpg.connect(pg.with_database(template, "postgres"))
    fresh_name = f"jdtest_{os.getpid()}_unmigrated"
    await admin.execute(f"CREATE DATABASE {fresh_name}")
    fresh = pg.with_database(template, fresh_name)
    url = pgbouncer.url(fresh, declared=False)
    worker = None
    try:
        done = run_cli("migrate", dsn=url)
        assert done.returncode == 0 and "applied" in done.stdout, done.stderr

        log = tmp_path / "worker.log"
        worker = start_worker(url, log_path=log, JOB_PROCESSOR_POLL_INTERVAL="0.1")
        submitted = run_cli("submit", "echo", "--input", '{"n": 1}', "--pipeline", "p-1", "--json", dsn=url)
        assert submitted.returncode == 0, submitted.stderr
        job_id = json.loads(submitted.stdout)["id"]
        conn = await asyncpg.connect(fresh)
        try:
            await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                           what="the worker to run the job")
        finally:
            await conn.close()
        # The other commands in this process (each start of a new one costs seconds on a busy machine).
        monkeypatch.setenv("DATABASE_URL", url)
        listed, shown, pipelines, workers, again, other = [await in_process(*args) for args in (
            ("jobs", "--json"), ("show", job_id), ("pipelines",), ("workers",), ("migrate",),
            ("submit", "nobody.serves", "--json"))]
        assert [j["status"] for j in json.loads(listed)] == ["completed"]
        assert job_id in shown and "p-1" in pipelines and str(worker.pid) in workers
        assert "up to date" in again
        waiting = json.loads(other)["id"]
        assert json.loads(await in_process("cancel", waiting, "--json")) == {"action": "cancel", "jobs": [waiting]}
        assert waiting in await in_process("retry", waiting, "--json")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        text = log.read_text()
        assert text.count(POLLING) == 1, text
        assert "Traceback" not in text and "prepared statement" not in text, text
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        await pg.drop_test_database(fresh)
        await admin.close()


async def test_listen_url_brings_pushed_work_back(pooled: str, dsn: str, conn: asyncpg.Connection,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """With DATABASE_LISTEN_URL the worker listens there: a job is taken at once although the
    poll interval is 10 s."""
    caplog.set_level(logging.INFO, logger="jobdesk.worker")
    worker = RunningWorker(pooled, {"echo": EchoProcessor()}, DATABASE_LISTEN_URL=dsn,
                           JOB_PROCESSOR_POLL_INTERVAL=10)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) FROM workers WHERE state = 'running'"),
                       what="the worker to start")
        await asyncio.sleep(0.2)  # its first claim round has found nothing, and it sleeps
        job_id = await conn.fetchval("INSERT INTO jobs (type, input_data) VALUES ('echo', '{}') RETURNING id")
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       timeout=3, what="the pushed job to run")
    finally:
        await worker.stop()
    assert not any(POLLING in r.getMessage() for r in caplog.records)


async def test_deaf_listener_falls_back_to_polling(pooled: str, dsn: str, conn: asyncpg.Connection,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """The listener's server process is paused: its heartbeat stops while the database answers.
    The worker says so, polls (a job is still taken), and listens again once it can."""
    caplog.set_level(logging.INFO, logger="jobdesk.worker")
    listen_url = f"{dsn}&application_name=jd-listen"
    worker = RunningWorker(pooled, {"echo": EchoProcessor()}, DATABASE_LISTEN_URL=listen_url,
                           JOB_LISTEN_HEARTBEAT_INTERVAL=0.3, JOB_PROCESSOR_POLL_INTERVAL=0.2)
    paused: int | None = None
    try:
        paused = await wait_for(lambda: conn.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'jd-listen'"), what="the listener")
        await wait_for(lambda: asyncio.sleep(0, worker.worker.listening.heard),
                       what="a first heartbeat")
        os.kill(paused, signal.SIGSTOP)
        await wait_for(lambda: asyncio.sleep(0, any("went deaf" in r.getMessage() for r in caplog.records)),
                       timeout=10, what="the deaf listener to be noticed")
        job_id = await conn.fetchval("INSERT INTO jobs (type, input_data) VALUES ('echo', '{}') RETURNING id")
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       timeout=5, what="a job taken by polling")
        os.kill(paused, signal.SIGCONT)
        paused = None
        await wait_for(lambda: asyncio.sleep(0, any("hears its heartbeat again" in r.getMessage()
                                                    for r in caplog.records)),
                       timeout=10, what="the worker to listen again")
    finally:
        if paused is not None:
            os.kill(paused, signal.SIGCONT)
        await worker.stop()
    assert sum("went deaf" in r.getMessage() for r in caplog.records) == 1


async def test_listener_on_another_database_is_deaf(dsn: str, template: str) -> None:
    """A listen URL that points elsewhere than where the changes are written never hears them:
    the heartbeat sent through the writers' path does not come back."""
    other = await pg.create_test_database(template)
    writers = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        for where, deaf in ((dsn, False), (other, True)):
            listener = Listener(where, {}, send=lambda ch, p: writers.execute("SELECT pg_notify($1, $2)", ch, p),
                                heartbeat_interval=0.2)
            await listener.open()
            try:
                await listener.ping()  # sends the first heartbeat
                await asyncio.sleep(0.3)
                if deaf:
                    with pytest.raises(ListenerDeaf):
                        await listener.ping()
                else:
                    await listener.ping()
                    assert listener.heard
            finally:
                await listener.close()
    finally:
        await writers.close()
        await pg.drop_test_database(other)
