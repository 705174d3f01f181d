"""Job types paused across a fleet and limited at run time, with real worker processes on the real
PostgreSQL (and one behind PgBouncer in transaction mode, without a LISTEN): a pause from the CLI
stops every worker claiming the type within a poll interval while other types go on, a running
job finishes, resume starts claims again; a limit changed at run time is obeyed by a running
worker; bad input is one line and a non-zero exit, and writes nothing."""

from __future__ import annotations

import asyncio
import getpass
import json
from pathlib import Path

import asyncpg

from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from tests.cli.test_cli import one_line_error
from tests.helpers import flow_workers, run_cli, wait_for
from tests.pgbouncer import PgBouncer

# Within a poll interval (0.1 s in `flow_workers`), with a wide margin for a loaded machine:
# the tests never measure speed.
SETTLE_S = 3.0


async def enqueue(conn: asyncpg.Connection, job_type: str, n: int, seconds: float = 0) -> list[str]:
    return list(await transitions.enqueue(conn, [JobCreate(type=job_type, input_data={"seconds": seconds})
                                                 for _ in range(n)]))


async def count(conn: asyncpg.Connection, job_type: str, status: str) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM jobs WHERE type = $1 AND status = $2", job_type, status))


async def live_workers(conn: asyncpg.Connection, n: int) -> None:
    await wait_for(lambda: conn.fetchval("SELECT count(*) = $1 FROM workers WHERE state = 'running'", n),
                   timeout=60, what=f"{n} workers")


async def test_pause_from_the_cli_stops_every_worker_and_resume_starts_them(
        conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    with flow_workers(dsn, tmp_path, 2):
        await live_workers(conn, 2)
        [long_job] = await enqueue(conn, "flow.free", 1, seconds=2.0)
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs WHERE id = $1", long_job),
                       what="the long job to start")
        paused = run_cli("types", "pause", "flow.free", "--reason", "downstream outage", dsn=dsn)
        assert paused.returncode == 0, paused.stderr
        assert "type flow.free: paused by" in paused.stdout
        await asyncio.sleep(SETTLE_S)  # every worker has read the pause by now
        queued = await enqueue(conn, "flow.free", 20)
        await enqueue(conn, "flow.echo", 20)
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 20 FROM jobs WHERE type = 'flow.echo' "
                                             "AND status = 'completed'"), what="the other type to go on")
        # The running job finished; none of the paused type's new jobs started on either worker.
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", long_job),
                       what="the running job to finish")
        await asyncio.sleep(1.0)
        assert await count(conn, "flow.free", "queued") == 20
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND started_at IS NOT NULL",
                                   queued) == 0

        shown = run_cli("show", queued[0], dsn=dsn)
        assert shown.returncode == 0, shown.stderr
        assert f"type paused by {getpass.getuser()} at " in shown.stdout

        resumed = run_cli("types", "resume", "flow.free", dsn=dsn)
        assert resumed.returncode == 0, resumed.stderr
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 21 FROM jobs WHERE type = 'flow.free' "
                                             "AND status = 'completed'"), what="claims to start again")
    audit = await conn.fetch("SELECT action, job_type, reason, os_user, source FROM audit_log "
                             "WHERE job_type = 'flow.free' ORDER BY id")
    assert [(r["action"], r["reason"], r["source"]) for r in audit] == [
        ("pause-type", "downstream outage", "cli"), ("resume-type", None, "cli")]
    assert audit[0]["os_user"] == getpass.getuser()


async def test_a_limit_changed_at_run_time_is_obeyed_by_a_running_worker(
        conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    with flow_workers(dsn, tmp_path, 1):
        await live_workers(conn, 1)
        await enqueue(conn, "flow.free", 200, seconds=0.3)
        await wait_for(lambda: conn.fetchval("SELECT count(*) >= 5 FROM jobs WHERE type = 'flow.free' "
                                             "AND status = 'in_progress'"), what="the worker to run many at once")
        changed = run_cli("types", "set", "flow.free", "--limit", "2", dsn=dsn)
        assert changed.returncode == 0, changed.stderr
        assert "limit 2 from database (set by" in changed.stdout
        await asyncio.sleep(SETTLE_S)  # the jobs started before the change have ended
        most = 0
        for _ in range(40):
            most = max(most, await count(conn, "flow.free", "in_progress"))
            await asyncio.sleep(0.05)
        assert 1 <= most <= 2, most
        listed = run_cli("types", "--json", dsn=dsn)
        assert listed.returncode == 0, listed.stderr
        [entry] = [t for t in json.loads(listed.stdout)["types"] if t["type"] == "flow.free"]
        assert entry["limit"] == 2 and entry["limit_source"] == f"database (set by {getpass.getuser()})"
        assert entry["paused"] is False and entry["paused_by"] is None
        cleared = run_cli("types", "set", "flow.free", "--clear", dsn=dsn)
        assert cleared.returncode == 0, cleared.stderr
        await enqueue(conn, "flow.free", 40, seconds=0.3)
        await wait_for(lambda: conn.fetchval("SELECT count(*) > 2 FROM jobs WHERE type = 'flow.free' "
                                             "AND status = 'in_progress'"), interval=0.02,
                       what="the limit to be lifted")


async def test_the_setting_is_the_default_and_the_database_wins(
        conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    changed = run_cli("types", "set", "flow.free", "--limit", "1", "--rate", "50/s", dsn=dsn)
    assert changed.returncode == 0, changed.stderr
    with flow_workers(dsn, tmp_path, 1, JOB_TYPE_LIMITS="flow.free=5,flow.echo=3", JOB_USER_LIMITS="flow.echo=2"):
        await live_workers(conn, 1)
        listed = run_cli("types", dsn=dsn)
        assert listed.returncode == 0, listed.stderr
        rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
        assert "env JOB_TYPE_LIMITS" in rows["flow.echo"] and "env JOB_USER_LIMITS" in rows["flow.echo"]
        assert "database (set by" in rows["flow.free"] and " 1 " in rows["flow.free"]
        # The worker declared its setting without overriding the operator's limit...
        assert await conn.fetchval("SELECT max_running FROM type_limits WHERE type = 'flow.free'") == 1
        assert await conn.fetchval("SELECT env_max_running FROM type_limits WHERE type = 'flow.free'") == 5
        # ...which, cleared, gives way to the setting again.
        cleared = run_cli("types", "set", "flow.free", "--limit", "none", dsn=dsn)
        assert cleared.returncode == 0, cleared.stderr
        assert await conn.fetchval("SELECT max_running FROM type_limits WHERE type = 'flow.free'") == 5
        assert await conn.fetchval("SELECT rate_max FROM flow_limits WHERE type = 'flow.free'") == 50


async def test_pause_behind_pgbouncer_without_a_listen(conn: asyncpg.Connection, dsn: str, tmp_path: Path,
                                                        pgbouncer: PgBouncer) -> None:
    pooled = pgbouncer.url(dsn, declared=False)
    with flow_workers(pooled, tmp_path, 1):
        await live_workers(conn, 1)
        assert run_cli("types", "pause", "flow.free", dsn=pooled).returncode == 0
        await asyncio.sleep(SETTLE_S)  # the worker polls the paused types: no NOTIFY reaches it
        await enqueue(conn, "flow.free", 10)
        await enqueue(conn, "flow.echo", 10)
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 10 FROM jobs WHERE type = 'flow.echo' "
                                             "AND status = 'completed'"), what="the other type to go on")
        await asyncio.sleep(1.0)
        assert await count(conn, "flow.free", "queued") == 10
        assert run_cli("types", "resume", "flow.free", dsn=pooled).returncode == 0
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 10 FROM jobs WHERE type = 'flow.free' "
                                             "AND status = 'completed'"), what="claims to start again")


def test_bad_input_on_the_command_line_is_one_line_and_writes_nothing(dsn: str) -> None:
    one_line_error(run_cli("types", "pause", "", dsn=dsn), "type name is empty")
    one_line_error(run_cli("types", "pause", "t" * 256, dsn=dsn), "at most 255")
    one_line_error(run_cli("types", "resume", " ", dsn=dsn), "type name is empty")
    one_line_error(run_cli("types", "set", "img", "--limit", "-1", dsn=dsn), "limit", "below 0")
    one_line_error(run_cli("types", "set", "img", "--user-limit", "many", dsn=dsn), "user_limit", "whole number")
    one_line_error(run_cli("types", "set", "img", "--limit", "2", "--rate", "10/x", dsn=dsn), "rate", "not a rate")
    one_line_error(run_cli("types", "set", "img", "--user-rate", "fast", dsn=dsn), "user_rate", "not a rate")
    one_line_error(run_cli("types", "set", "img", dsn=dsn), "no limit given")
    listed = run_cli("types", "--json", dsn=dsn)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() and '"types": []' in listed.stdout
