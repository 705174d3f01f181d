"""Schedules at a glance: the expression in words (cron-descriptor), the last 20 runs with their
status, start and duration as real workers ran them, and `jobdesk schedule run NAME`, which
enqueues one run now, audited, without moving the next regular run."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import asyncpg

from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.schedules import Schedule
from jobdesk.runtime import scheduler
from jobdesk.store import schedule_runs
from tests.helpers import RunningWorker, run_cli, wait_for


class Flaky(BaseProcessor):
    """Fails the jobs whose input says so, after a short nap."""

    async def process(self, job: Job) -> ProcessorResult:
        await asyncio.sleep(0.05)
        if job.input_data.get("fail"):
            raise RuntimeError("boom")
        return ProcessorResult(result_data={})


def test_descriptions_in_words() -> None:
    def words(cron: str) -> str | None:
        return Schedule(name="s", type="t", cron=cron).description

    # The output of cron-descriptor 2.2.1 (pinned), with a 24-hour clock.
    assert words("0 9 * * 1-5") == "At 09:00, Monday through Friday"
    assert words("*/5 * * * *") == "Every 5 minutes"
    assert words("30 4 1 * *") == "At 04:30, on day 1 of the month"
    assert words("0 0 * * 5L") == "At 00:00, on the last Friday of the month"
    assert Schedule(name="s", type="t", every_s=30).description == "Every 30 seconds"
    assert Schedule(name="s", type="t", every_s=3600).description == "Every hour"
    assert Schedule(name="s", type="t", every_s=5400).description == "Every 90 minutes"


async def test_recent_runs_follow_a_real_worker(dsn: str, conn: asyncpg.Connection) -> None:
    now = await conn.fetchval("SELECT now()")
    # 25 missed hourly ticks, all run: more than the 20 `recent` shows.
    await scheduler.add(conn, Schedule(name="hourly", type="flaky", every_s=3600, misfire="all"))
    await conn.execute("UPDATE schedules SET next_tick_at = $1 WHERE name = 'hourly'", now - timedelta(hours=25))
    await scheduler.add(conn, Schedule(name="bad", type="flaky", cron="0 9 * * 1-5", input_data={"fail": True}))
    worker = RunningWorker(dsn, {"flaky": Flaky()}, JOB_RETRY_INTERVALS=[])
    await wait_for(lambda: conn.fetchval("SELECT count(*) >= 25 FROM jobs WHERE status = 'completed'"),
                   what="the catch-up runs")
    done = run_cli("schedule", "run", "bad", dsn=dsn)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split(":")[0]
    await wait_for(lambda: conn.fetchval("SELECT status = 'failed' FROM jobs WHERE id = $1", job_id),
                   what="the run to fail")
    await worker.stop()
    listed = {s["name"]: s for s in json.loads(run_cli("schedule", "list", "--json", dsn=dsn).stdout)}
    assert listed["bad"]["description"] == "At 09:00, Monday through Friday"
    hourly = listed["hourly"]["recent"]
    assert len(hourly) == 20
    assert [r["tick_at"] for r in hourly] == sorted(r["tick_at"] for r in hourly), "oldest first"
    assert {r["status"] for r in hourly} == {"completed"}
    assert all(r["started_at"] and 0.04 <= r["duration_s"] < 10 and not r["manual"] for r in hourly)
    [bad] = listed["bad"]["recent"]
    assert (bad["job_id"], bad["status"], bad["manual"]) == (job_id, "failed", True)
    assert bad["started_at"] is not None and bad["duration_s"] >= 0.04


async def test_run_now_is_audited_and_leaves_the_next_run(dsn: str, conn: asyncpg.Connection) -> None:
    await scheduler.add(conn, Schedule(name="nightly", type="echo", cron="0 2 * * *", input_data={"k": 1},
                                       priority=3))
    await scheduler.set_paused(conn, "nightly", True)
    await scheduler.set_paused(conn, "nightly", False)
    before = await conn.fetchrow("SELECT next_tick_at, last_tick_at, last_job_id FROM schedules")
    done = run_cli("schedule", "run", "nightly", "--json", dsn=dsn)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["schedule"] == "nightly"
    job = await conn.fetchrow("SELECT type, input_data, priority, status FROM jobs WHERE id = $1", out["job_id"])
    assert (job["type"], job["input_data"], job["priority"], job["status"]) == ("echo", {"k": 1}, 3, "queued")
    assert await conn.fetchrow("SELECT next_tick_at, last_tick_at, last_job_id FROM schedules") == before
    audit = await conn.fetchrow("SELECT action, reason, job_ids, source FROM audit_log WHERE action = 'run-schedule'")
    assert (audit["reason"], audit["job_ids"], audit["source"]) == ("nightly", [out["job_id"]], "cli")
    # Nothing is due from it: a worker's firing makes no job.
    assert await scheduler.fire_due(conn) == []
    # A manual run at the instant of a regular tick does not take that tick's key.
    tick = before["next_tick_at"]
    await conn.execute("INSERT INTO schedule_ticks (schedule, tick_at, job_id, manual) "
                       "VALUES ('nightly', $1, 'x', true)", tick)
    assert await conn.fetchval("INSERT INTO schedule_ticks (schedule, tick_at, job_id) VALUES ('nightly', $1, 'y') "
                               "ON CONFLICT DO NOTHING RETURNING tick_at", tick) == tick
    runs = (await schedule_runs.recent_runs(conn, ["nightly"]))["nightly"]
    assert runs[0].job_id == out["job_id"] and runs[0].status == "queued" and runs[0].started_at is None


def test_run_of_an_unknown_schedule_is_one_line(dsn: str) -> None:
    done = run_cli("schedule", "run", "ghost", dsn=dsn)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == ["jobdesk: error: no schedule named ghost"]
