"""What the worker does when things go wrong: killed workers, a restarted database, stop signals,
operator commands, and several workers sharing one queue."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from pathlib import Path

import asyncpg
import pytest

from jobdesk.embedded.server import EmbeddedServer
from tests.helpers import Inbox, assert_no_job_lost, run_cli, start_worker, wait_for

FAST = {"JOB_HEARTBEAT_INTERVAL": "0.3", "JOB_LEASE_TIMEOUT": "1.5", "JOB_RETRY_INTERVALS": "0.1,0.1,0.1",
        "JOB_PROCESSOR_MODULES": "cli_processors"}


def runs(path: Path) -> Counter[str]:
    if not path.exists():
        return Counter()
    return Counter(line.split()[0] for line in path.read_text().splitlines() if line)


async def status(conn: asyncpg.Connection, job_id: str) -> str:
    return await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)


async def test_kill_9_mid_job_another_worker_finishes_it(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    log = tmp_path / "runs.txt"
    job_id = await conn.fetchval("INSERT INTO jobs (type, input_data) VALUES ('test.sleep_record', "
                                 "'{\"seconds\": 1}') RETURNING id")
    first = start_worker(dsn, log_path=tmp_path / "a.log", RUN_LOG=str(log), **FAST)
    second = None
    inbox = Inbox()
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs WHERE id = $1", job_id),
                       what="the first worker to start the job")
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = start_worker(dsn, log_path=tmp_path / "b.log", RUN_LOG=str(log), JOB_ALERT_URLS=inbox.url,
                              **FAST)
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       timeout=30, what="the second worker to finish the job")
        await wait_for(lambda: asyncio.sleep(0, inbox.messages), what="the worker-lost alert")
    finally:
        inbox.close()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(20)
    row = await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)
    assert row["result_data"]["pid"] == second.pid
    assert row["retry_count"] == 1 and row["attempts"] == 2
    history = await conn.fetch("SELECT outcome, error_message FROM job_attempts WHERE job_id = $1", job_id)
    assert [(h["outcome"], h["error_message"]) for h in history] == [("lost", "worker lost")]
    assert runs(log) == Counter({job_id: 1}), "one completed run: the killed one never finished"
    states = {r["pid"]: r["state"] for r in await conn.fetch("SELECT pid, state FROM workers")}
    assert states[first.pid] == "lost" and states[second.pid] == "stopped"
    [alert] = inbox.messages
    assert "worker lost" in alert["title"] and f"pid {first.pid}" in alert["message"] and job_id in alert["message"]
    await assert_no_job_lost(conn, 1)


async def test_postgres_restart_while_jobs_flow(dsn: str, conn: asyncpg.Connection, tmp_path: Path,
                                                pg_server: EmbeddedServer) -> None:
    total = 1000
    log = tmp_path / "runs.txt"
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'test.sleep_record', '{\"seconds\": 0.02}' "
                       "FROM generate_series(1, $1)", total)
    await conn.close()
    worker = start_worker(dsn, log_path=tmp_path / "w.log", RUN_LOG=str(log), **FAST)
    try:
        await asyncio.sleep(0)
        deadline = time.monotonic() + 30
        while len(runs(log)) < 150 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(runs(log)) >= 150, "jobs were flowing before the restart"
        pg_server.stop()
        await asyncio.sleep(1.0)
        pg_server.ensure_running()
        fresh = await asyncpg.connect(dsn)
        try:
            await wait_for(lambda: fresh.fetchval("SELECT count(*) = $1 FROM jobs WHERE status = 'completed'", total),
                           timeout=90, what="every job to complete after the restart")
            await assert_no_job_lost(fresh, total)
        finally:
            await fresh.close()
        assert worker.poll() is None, "the worker survived the outage"
        text = (tmp_path / "w.log").read_text()
        assert text.count("database unreachable") <= 2, "the outage is logged once (per connection kind)"
    finally:
        worker.terminate()
        assert worker.wait(30) == 0
    assert set(runs(log)) == set(await _all_ids(dsn))


async def test_a_worker_stopped_while_the_database_is_down_still_exits(
        dsn: str, conn: asyncpg.Connection, tmp_path: Path, pg_server: EmbeddedServer) -> None:
    """Stopping needs no database: what the worker cannot give back, the lease rescue takes back
    once the database returns, and no job is lost."""
    await conn.execute("""INSERT INTO jobs (type, input_data) VALUES ('sleep', '{"seconds": 8}')""")
    worker = start_worker(dsn, log_path=tmp_path / "w.log", JOB_SHUTDOWN_TIMEOUT="1", **FAST)
    second = None
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs"), what="the job to start")
        await conn.close()
        pg_server.stop()
        try:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0, "a worker asked to stop exits, database or not"
        finally:
            pg_server.ensure_running()
        log = (tmp_path / "w.log").read_text()
        assert "could not put 1 running job(s) back in the queue" in log, log[-3000:]
        second = start_worker(dsn, log_path=tmp_path / "w2.log", **FAST)
        fresh = await asyncpg.connect(dsn)
        try:
            await wait_for(lambda: fresh.fetchval("SELECT status = 'completed' FROM jobs"),
                           timeout=45, what="another worker to take the job back and run it")
            assert await fresh.fetchval("SELECT worker_id IS NULL AND attempts = 2 FROM jobs"), \
                "run again by the second worker, after the first one's attempt"
            await assert_no_job_lost(fresh, 1)
        finally:
            await fresh.close()
    finally:
        for proc in (worker, second):
            if proc is not None and proc.poll() is None:
                proc.kill()


async def _all_ids(dsn: str) -> list[str]:
    c = await asyncpg.connect(dsn)
    try:
        return [r["id"] for r in await c.fetch("SELECT id FROM jobs")]
    finally:
        await c.close()


async def test_sigterm_puts_running_jobs_back_and_they_complete_later(dsn: str, conn: asyncpg.Connection,
                                                                      tmp_path: Path) -> None:
    log = tmp_path / "runs.txt"
    # Jobs far longer than the shutdown timeout (0.5 s) and than any slowness of a loaded machine.
    ids = [r["id"] for r in await conn.fetch(
        "INSERT INTO jobs (type, input_data) SELECT 'test.sleep_record', '{\"seconds\": 60}' "
        "FROM generate_series(1, 3) RETURNING id")]
    starts = tmp_path / "starts.txt"
    worker = start_worker(dsn, log_path=tmp_path / "a.log", RUN_LOG=str(log), START_LOG=str(starts),
                          JOB_SHUTDOWN_TIMEOUT="0.5", **FAST)
    # Running, not only claimed: a job claimed but not yet started is given back without an attempt.
    await wait_for(lambda: asyncio.sleep(0, starts.exists() and len(starts.read_text().split()) == 3),
                   what="three jobs to run")
    t0 = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert time.monotonic() - t0 < 30, "it did not wait for the 60 s jobs"
    assert not log.exists(), "no run finished"
    rows = await conn.fetch("SELECT status, retry_count, worker_id FROM jobs")
    assert {(r["status"], r["retry_count"], r["worker_id"]) for r in rows} == {("queued", 0, None)}
    assert await conn.fetchval("SELECT count(*) FROM job_attempts WHERE outcome = 'interrupted'") == 3
    await conn.execute("UPDATE jobs SET input_data = '{\"seconds\": 0.1}'")
    again = start_worker(dsn, log_path=tmp_path / "b.log", RUN_LOG=str(log), **FAST)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 3 FROM jobs WHERE status = 'completed'"),
                       what="the jobs to complete after the restart")
    finally:
        again.terminate()
        assert again.wait(20) == 0
    assert runs(log) == Counter({i: 1 for i in ids})
    await assert_no_job_lost(conn, 3)


async def test_second_signal_stops_at_once(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data) VALUES ('test.sleep_record', '{\"seconds\": 30}')")
    starts = tmp_path / "starts.txt"
    worker = start_worker(dsn, log_path=tmp_path / "a.log", START_LOG=str(starts), **FAST)
    # Running, not only claimed (`in_progress`): a stop that comes between the claim and the start
    # gives the job back at once, and the worker rightly exits at the first signal.
    await wait_for(lambda: asyncio.sleep(0, starts.exists() and starts.read_text().strip() != ""),
                   what="the job to run")
    worker.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.5)
    assert worker.poll() is None, "the first signal waits for the running job"
    worker.send_signal(signal.SIGINT)
    assert worker.wait(10) == 0
    assert await conn.fetchval("SELECT status FROM jobs") == "queued"


async def test_pause_resume_and_drain_through_the_control_channel(dsn: str, conn: asyncpg.Connection,
                                                                    tmp_path: Path) -> None:
    worker = start_worker(dsn, log_path=tmp_path / "w.log", **FAST)
    try:
        worker_id = await wait_for(lambda: conn.fetchval("SELECT id FROM workers WHERE pid = $1", worker.pid),
                                   what="the worker to register")
        listed = json.loads(run_cli("workers", "--json", dsn=dsn).stdout)
        assert [w["id"] for w in listed] == [worker_id] and listed[0]["state"] == "running"
        assert "echo" in listed[0]["job_types"] and listed[0]["concurrency"] == 10
        assert run_cli("worker-ctl", worker_id, "pause", dsn=dsn).returncode == 0
        await wait_for(lambda: conn.fetchval("SELECT state = 'paused' FROM workers WHERE id = $1", worker_id),
                       what="the worker to pause")
        job_id = json.loads(run_cli("submit", "echo", "--json", dsn=dsn).stdout)["id"]
        await asyncio.sleep(1.0)
        assert await status(conn, job_id) == "queued", "a paused worker claims nothing"
        assert run_cli("worker-ctl", worker_id, "resume", dsn=dsn).returncode == 0
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the resumed worker to run the job")
        sleeper = json.loads(run_cli("submit", "sleep", "--input", '{"seconds": 1}', "--json", dsn=dsn).stdout)["id"]
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs WHERE id = $1", sleeper),
                       what="the sleep job to start")
        await asyncio.sleep(0.3)  # claimed is not yet started: the claim's answer may still be on its way
        assert run_cli("worker-ctl", worker_id, "drain", dsn=dsn).returncode == 0
        assert worker.wait(45) == 0, "a drained worker exits"
        assert await status(conn, sleeper) == "completed", "drain finishes running jobs"
        assert await conn.fetchval("SELECT state FROM workers WHERE id = $1", worker_id) == "stopped"
        refused = run_cli("worker-ctl", worker_id, "resume", dsn=dsn)
        assert refused.returncode == 1 and "it is stopped" in refused.stderr
        unknown = run_cli("worker-ctl", "nobody", "stop", dsn=dsn)
        assert unknown.returncode == 1 and "no worker with id nobody" in unknown.stderr
    finally:
        if worker.poll() is None:
            worker.kill()
    await assert_no_job_lost(conn, 2)


@pytest.mark.parametrize(("workers", "jobs"), [(2, 1000), (3, 3000)])
async def test_many_workers_run_each_job_exactly_once(dsn: str, conn: asyncpg.Connection, tmp_path: Path,
                                                      workers: int, jobs: int) -> None:
    log = tmp_path / "runs.txt"
    procs = [start_worker(dsn, log_path=tmp_path / f"w{i}.log", RUN_LOG=str(log), **FAST) for i in range(workers)]
    try:
        # The jobs come once every worker is up: one that started first could otherwise run
        # them all before the others have connected.
        await wait_for(lambda: conn.fetchval("SELECT count(*) = $1 FROM workers WHERE state = 'running'", workers),
                       timeout=60, what="every worker to start")
        # Each job takes 5 ms, so that no worker drains them all before the others wake up.
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'test.sleep_record', "
                           "'{\"seconds\": 0.005}' "
                           "FROM generate_series(1, $1)", jobs)
        await wait_for(lambda: conn.fetchval("SELECT count(*) = $1 FROM jobs WHERE status = 'completed'", jobs),
                       timeout=120, what="every job to complete")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            assert proc.wait(30) == 0
    counts = runs(log)
    assert len(counts) == jobs and set(counts.values()) == {1}, "a job ran twice"
    pids = {line.split()[1] for line in log.read_text().splitlines()}
    assert len(pids) == workers, "every worker took part"
    assert await conn.fetchval("SELECT max(attempts) FROM jobs") == 1
    await assert_no_job_lost(conn, jobs)
