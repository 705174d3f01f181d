"""Durable processors through the public doors, on the real PostgreSQL: a worker process killed
with kill -9 during a step, events from plain SQL, the CLI, the HTTP API and the client, retry
that keeps or forgets the steps, what `jobdesk show` and the waiting reason say, PgBouncer."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path

import asyncpg
import httpx

from jobdesk import JobClient
from jobdesk.core.models import JobCreate
from jobdesk.service.jobs import JobService
from jobdesk.store import transitions
from tests.api.test_api_server import start_api, stop
from tests.durable_processors import PROCESSOR_MAP
from tests.helpers import RunningWorker, run_cli, start_worker, wait_for
from tests.pgbouncer import PgBouncer

FAST = {"JOB_HEARTBEAT_INTERVAL": "0.3", "JOB_LEASE_TIMEOUT": "1.5", "JOB_RETRY_INTERVALS": "0.1,0.1,0.1",
        "JOB_PROCESSOR_MODULES": "durable_processors", "JOB_PROCESSOR_POLL_INTERVAL": "0.2"}
PROCESSORS = {name: cls() for name, cls in PROCESSOR_MAP.items()}


async def status_of(conn: asyncpg.Connection, job_id: str) -> str:
    return await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)


async def calls_of(conn: asyncpg.Connection, job_id: str) -> dict[str, int]:
    rows = await conn.fetch("SELECT step, count(*) AS n FROM step_calls WHERE job_id = $1 GROUP BY step", job_id)
    return {r["step"]: r["n"] for r in rows}


async def make_calls_table(conn: asyncpg.Connection) -> None:
    await conn.execute("CREATE TABLE step_calls (job_id text, step text, at timestamptz DEFAULT clock_timestamp())")


async def test_kill_9_during_step_two_reruns_only_step_two(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    await make_calls_table(conn)
    [job_id] = await transitions.enqueue(conn, [JobCreate("durable.three_steps", {"dsn": dsn, "step2_s": 3})])
    first = start_worker(dsn, log_path=tmp_path / "a.log", **FAST)
    second = None
    try:
        await wait_for(lambda: calls_of(conn, job_id), what="step 2 to start", timeout=30)
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM step_calls WHERE job_id = $1 AND step = 'two'",
                                             job_id), what="step 2 to start", timeout=30)
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert await status_of(conn, job_id) == "in_progress"
        second = start_worker(dsn, log_path=tmp_path / "b.log", **FAST)
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       timeout=40, what="the rescued job to complete")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(20)
    assert await calls_of(conn, job_id) == {"one": 1, "two": 2, "three": 1}, \
        "step 1's function ran once, step 2's twice (killed, then again), step 3's once"
    row = await conn.fetchrow("SELECT result_data, attempts, retry_count FROM jobs WHERE id = $1", job_id)
    assert row["result_data"] == {"steps": [1, {"two": 2}, 3]} and row["attempts"] == 2


async def test_events_from_sql_cli_api_and_client_wake_their_jobs(dsn: str, conn: asyncpg.Connection) -> None:
    keys = ["from-sql", "from-cli", "from-api", "from-client"]
    ids = await transitions.enqueue(conn, [JobCreate("durable.wait", {"key": k}) for k in keys])
    worker = RunningWorker(dsn, PROCESSORS)
    proc = None
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 4 FROM job_waits"), what="four waits")
        async with JobService(await asyncpg.create_pool(dsn, min_size=1, max_size=2)) as jobs:
            reason = await jobs.waiting_reason(ids[0])
            assert reason is not None and reason.kind == "event"
            assert reason.text == "waiting for event from-sql"
        await conn.execute("INSERT INTO job_events (key, payload) VALUES ('from-sql', '{\"via\": \"sql\"}')")
        out = await asyncio.to_thread(run_cli, "event", "emit", "from-cli", "--payload", '{"via": "cli"}', dsn=dsn)
        assert out.returncode == 0 and out.stdout.strip() == "event from-cli emitted", out.stderr
        again = await asyncio.to_thread(run_cli, "event", "emit", "from-cli", "--payload", '{"via": "x"}', dsn=dsn)
        assert again.returncode == 0 and "nothing changed" in again.stdout
        bad = await asyncio.to_thread(run_cli, "event", "emit", "k", "--payload", "{nope", dsn=dsn)
        assert bad.returncode == 2 and "--payload is not valid JSON" in bad.stderr and "Traceback" not in bad.stderr
        nul = await asyncio.to_thread(run_cli, "event", "emit", "k", "--payload", '"a\\u0000b"', dsn=dsn)
        assert nul.returncode == 1 and nul.stderr.strip() == ("jobdesk: error: the event's payload contains a NUL "
                                                              "character (\\u0000), which PostgreSQL cannot store")
        proc, url = await asyncio.to_thread(start_api, dsn, "--no-auth")
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            answer = await http.post("/api/events", json={"key": "from-api", "payload": {"via": "api"}})
            assert answer.status_code == 201 and answer.json() == {"key": "from-api", "first": True}
            answer = await http.post("/api/events", json={"key": "from-api", "payload": {"via": "again"}})
            assert answer.status_code == 200 and answer.json() == {"key": "from-api", "first": False}
            answer = await http.post("/api/events", json={"key": "", "payload": 1})
            assert answer.status_code == 422 and answer.json()["error"]["code"]
        async with await JobClient.connect(dsn) as client:
            assert await client.emit_event("from-client", {"via": "client"}) is True
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 4 FROM jobs WHERE status = 'completed'"),
                       what="all four woken")
    finally:
        if proc is not None:
            stop(proc)
        await worker.stop()
    results = [await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1", i) for i in ids]
    assert results == [{"payload": {"via": v}} for v in ("sql", "cli", "api", "client")]


async def test_the_events_scope_guards_post_api_events(dsn: str) -> None:
    async with await JobClient.connect(dsn) as client:
        service = JobService(client.pool)
        no_events = await service.create_token("reader", scopes=["read", "submit"])
        with_events = await service.create_token("webhook", scopes=["events"])
    proc, url = await asyncio.to_thread(start_api, dsn)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            refused = await http.post("/api/events", json={"key": "k"},
                                      headers={"Authorization": f"Bearer {no_events}"})
            assert refused.status_code == 403 and "events" in refused.json()["error"]["message"]
            taken = await http.post("/api/events", json={"key": "k"},
                                    headers={"Authorization": f"Bearer {with_events}"})
            assert taken.status_code == 201
    finally:
        stop(proc)


async def test_retry_keeps_steps_and_fresh_forgets_them(dsn: str, conn: asyncpg.Connection) -> None:
    await make_calls_table(conn)
    [job_id] = await transitions.enqueue(conn, [JobCreate("durable.three_steps", {"dsn": dsn})])
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the job")
        # A completed job cannot be retried: fail it by hand, as a later step failing would.
        await conn.execute("UPDATE jobs SET status = 'failed', error_message = 'x' WHERE id = $1", job_id)
        out = await asyncio.to_thread(run_cli, "retry", job_id, dsn=dsn)
        assert out.returncode == 0, out.stderr
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the retried job")
        assert await calls_of(conn, job_id) == {"one": 1, "two": 1, "three": 2}, "stored steps were not run again"
        await conn.execute("UPDATE jobs SET status = 'failed', error_message = 'x' WHERE id = $1", job_id)
        bad = await asyncio.to_thread(run_cli, "retry", "--all", "--fresh", dsn=dsn)
        assert bad.returncode == 2 and "--fresh works on job ids" in bad.stderr
        out = await asyncio.to_thread(run_cli, "retry", "--fresh", job_id, dsn=dsn)
        assert out.returncode == 0 and "from scratch" in out.stdout, out.stderr
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the job retried from scratch")
        assert await calls_of(conn, job_id) == {"one": 2, "two": 2, "three": 3}
    finally:
        await worker.stop()
    shown = await asyncio.to_thread(run_cli, "show", job_id, dsn=dsn)
    assert shown.returncode == 0
    text = shown.stdout
    assert "steps:" in text and "one" in text and '{"two": 2}' in text
    as_json = json.loads((await asyncio.to_thread(run_cli, "show", job_id, "--json", dsn=dsn)).stdout)
    assert [s["name"] for s in as_json["steps"]] == ["one", "two", "three"]


async def test_waiting_reasons_of_sleeping_and_parent_jobs(dsn: str, conn: asyncpg.Connection) -> None:
    """The reasons from the service, and as `jobdesk show` prints them (text and --json)."""
    sleeper, parent, waiter = await transitions.enqueue(conn, [
        JobCreate("durable.sleep", {"seconds": 600}), JobCreate("durable.parent", {}),
        JobCreate("durable.wait", {"key": "upload-done:42", "timeout": 3600})])
    slow_children = dict(PROCESSORS)

    class SlowChild(type(PROCESSORS["durable.child"])):  # type: ignore[misc]
        async def process(self, job):  # type: ignore[no-untyped-def]
            await asyncio.sleep(6)

    slow_children["durable.child"] = SlowChild()
    worker = RunningWorker(dsn, slow_children, MAX_CONCURRENT_JOBS=2)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 3 FROM job_waits"), what="all three suspended")
        async with JobService(await asyncpg.create_pool(dsn, min_size=1, max_size=2)) as jobs:
            reason = await jobs.waiting_reason(sleeper)
            assert reason is not None and reason.kind == "sleeping" and reason.text.startswith("sleeping until ")
            assert "UTC (in 9 min)" in reason.text
            await wait_for(lambda: conn.fetchval("SELECT count(*) >= 2 FROM jobs WHERE status = 'in_progress'"),
                           what="children running")
            reason = await jobs.waiting_reason(parent)
            assert reason is not None and reason.text == "waiting for 3 of 3 child jobs"
            shown = await asyncio.to_thread(run_cli, "show", parent, "--json", dsn=dsn)
            assert json.loads(shown.stdout)["waiting_reason"] == "waiting for 3 of 3 child jobs"
            shown = await asyncio.to_thread(run_cli, "show", sleeper, dsn=dsn)
            assert re.search(r"^ *waiting  sleeping until \d\d:\d\d:\d\d UTC \(in 9 min\)$", shown.stdout, re.M), \
                shown.stdout
            shown = await asyncio.to_thread(run_cli, "show", waiter, dsn=dsn)
            assert re.search(r"^ *waiting  waiting for event upload-done:42 \(timeout \d\d:\d\d:\d\d UTC\)$",
                             shown.stdout, re.M), shown.stdout
            detail = await jobs.job_detail(parent)
            assert [s.name for s in detail.steps] == ["@spawn 1", "@wait-jobs 1"]
            await jobs.cancel([sleeper])
    finally:
        await worker.stop()
    assert await status_of(conn, sleeper) == "cancelled"


async def test_durable_jobs_through_pgbouncer(dsn: str, conn: asyncpg.Connection, pgbouncer: PgBouncer) -> None:
    pooled = pgbouncer.url(dsn, declared=False)
    await make_calls_table(conn)
    jobs = [JobCreate("durable.three_steps", {"dsn": dsn}), JobCreate("durable.sleep", {"seconds": 0.5}),
            JobCreate("durable.wait", {"key": "pooled"}), JobCreate("durable.parent", {})]
    ids = await transitions.enqueue(conn, jobs)
    worker = RunningWorker(pooled, PROCESSORS)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM job_waits WHERE event_key = 'pooled'"),
                       what="the wait")
        async with await JobClient.connect(pooled) as client:
            assert await client.emit_event("pooled", [1, 2]) is True
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 4 FROM jobs WHERE id = ANY($1::text[]) "
                                             "AND status = 'completed'", ids), timeout=40, what="all four")
    finally:
        await worker.stop()
    assert await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1", ids[2]) == {"payload": [1, 2]}
