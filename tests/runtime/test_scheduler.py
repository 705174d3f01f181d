"""Periodic jobs: tick maths, misfire and overlap policies, the CLI, and one job per tick with
several workers and no leader."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.errors import InvalidJob
from jobdesk.core.schedules import Schedule, due_ticks
from jobdesk.runtime import scheduler
from jobdesk.store.db import connect
from tests.helpers import run_cli, start_worker, wait_for

T0 = datetime(2026, 3, 27, 12, 0, 0, tzinfo=UTC)


def every(seconds: float, **kw: object) -> Schedule:
    return Schedule(name="s", type="echo", every_s=seconds, **kw)  # type: ignore[arg-type]


def test_interval_ticks_line_up_on_whole_multiples() -> None:
    s = every(10)
    assert s.next_tick(T0 + timedelta(seconds=3)) == T0 + timedelta(seconds=10)
    assert s.next_tick(T0) == T0 + timedelta(seconds=10), "strictly after"
    assert s.expression == "every 10s" and every(3600).expression == "every 1h"


def test_the_timezone_governs_cron_ticks_across_a_dst_change() -> None:
    nine = Schedule(name="report", type="echo", cron="0 9 * * *", timezone="Europe/Berlin")
    first = nine.next_tick(datetime(2026, 3, 28, 0, 0, tzinfo=UTC))
    second = nine.next_tick(first)
    assert first == datetime(2026, 3, 28, 8, 0, tzinfo=UTC)  # 09:00 CET
    assert second == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 CEST, the day clocks go forward
    nightly = Schedule(name="n", type="echo", cron="0 2 * * *", timezone="America/New_York")
    # 02:00 EDT, then 02:00 EST: the night the clocks go back, 02:00 comes once, an hour later in UTC
    assert nightly.next_tick(datetime(2026, 10, 31, 0, 0, tzinfo=UTC)) == datetime(2026, 10, 31, 6, 0, tzinfo=UTC)
    assert nightly.next_tick(datetime(2026, 10, 31, 6, 0, tzinfo=UTC)) == datetime(2026, 11, 1, 7, 0, tzinfo=UTC)


def test_on_time_ticks_run_whatever_the_policy() -> None:
    for policy in ("skip", "once", "all"):
        run, following = due_ticks(every(10, misfire=policy), T0, T0 + timedelta(seconds=0.4))
        assert run == [T0] and following == T0 + timedelta(seconds=10)
    assert due_ticks(every(10), T0 + timedelta(seconds=10), T0 + timedelta(seconds=5)) == (
        [], T0 + timedelta(seconds=10)), "nothing due yet"


def test_misfire_policies_after_downtime() -> None:
    now = T0 + timedelta(seconds=96)  # ticks at 0, 10, ..., 90 were missed (90 is 6 s late: over half a period)
    assert due_ticks(every(10, misfire="skip"), T0, now) == ([], T0 + timedelta(seconds=100))
    assert due_ticks(every(10, misfire="once"), T0, now)[0] == [T0 + timedelta(seconds=90)]
    assert due_ticks(every(10, misfire="all"), T0, now)[0] == [T0 + timedelta(seconds=10 * k) for k in range(10)]
    far = T0 + timedelta(seconds=1000.7)
    run, _ = due_ticks(every(1, misfire="all"), T0, far)
    assert len(run) == 101 and run[0] == T0 + timedelta(seconds=900) and run[-1] == T0 + timedelta(seconds=1000), \
        "the newest 100 missed ticks, then the current one"
    run, _ = due_ticks(every(1, misfire="all"), T0, T0 + timedelta(seconds=5.2))
    assert run == [T0 + timedelta(seconds=k) for k in range(6)], "missed ones, then the one on time"
    assert due_ticks(every(1, misfire="skip"), T0, T0 + timedelta(seconds=5.2))[0] == [T0 + timedelta(seconds=5)]


def test_bad_schedules_name_the_problem() -> None:
    with pytest.raises(InvalidJob, match="bad cron expression 'every day'"):
        Schedule(name="x", type="echo", cron="every day").check()
    with pytest.raises(InvalidJob, match="unknown timezone 'Mars/Base'"):
        Schedule(name="x", type="echo", cron="* * * * *", timezone="Mars/Base").check()
    with pytest.raises(InvalidJob, match="either a cron expression or an interval"):
        Schedule(name="x", type="echo").check()
    with pytest.raises(InvalidJob, match="at least 1 second"):
        every(0.5).check()


async def add(conn: asyncpg.Connection, schedule: Schedule, next_tick_at: datetime | None = None) -> None:
    await scheduler.add(conn, schedule)
    if next_tick_at is not None:
        await conn.execute("UPDATE schedules SET next_tick_at = $2 WHERE name = $1", schedule.name, next_tick_at)


async def test_concurrent_firing_makes_one_job_per_tick(dsn: str, conn: asyncpg.Connection) -> None:
    now = await conn.fetchval("SELECT now()")
    # A tick an hour, 30 missed: no new tick comes due while the test runs, however slowly.
    await add(conn, Schedule(name="burst", type="echo", every_s=3600, misfire="all"), now - timedelta(hours=30))
    conns = [await connect(dsn) for _ in range(8)]
    try:
        created = await asyncio.gather(*(scheduler.fire_due(c) for c in conns))
    finally:
        for c in conns:
            await c.close()
    assert sum(len(c) for c in created) == 30 or sum(len(c) for c in created) == 31
    ticks = await conn.fetch("SELECT tick_at, job_id FROM schedule_ticks WHERE schedule = 'burst' ORDER BY tick_at")
    assert len({t["job_id"] for t in ticks}) == len(ticks) == await conn.fetchval("SELECT count(*) FROM jobs")
    gaps = [(b["tick_at"] - a["tick_at"]).total_seconds() for a, b in zip(ticks, ticks[1:])]
    assert gaps == [3600.0] * (len(ticks) - 1)
    assert await scheduler.fire_due(conn) == [], "every tick handled once"


async def test_overlap_skip_waits_for_the_previous_job(conn: asyncpg.Connection) -> None:
    now = await conn.fetchval("SELECT now()")
    await add(conn, Schedule(name="often", type="echo", every_s=1, overlap="skip", misfire="once"),
              now - timedelta(seconds=1.5))
    [first] = await scheduler.fire_due(conn)
    skipped = "SELECT count(*) FROM schedule_ticks WHERE job_id IS NULL"
    before = await conn.fetchval(skipped)
    await asyncio.sleep(1.1)
    assert await scheduler.fire_due(conn) == [], "the first job is still queued"
    # One tick a second: after 1.1 s one or, when the sleep runs late, two ticks were due.
    assert before + 1 <= await conn.fetchval(skipped) <= before + 2, "the tick is recorded as skipped"
    await conn.execute("UPDATE jobs SET status = 'completed' WHERE id = $1", first)
    await asyncio.sleep(1.1)
    assert len(await scheduler.fire_due(conn)) == 1


async def test_paused_schedules_make_nothing_and_resume_from_the_next_tick(conn: asyncpg.Connection) -> None:
    now = await conn.fetchval("SELECT now()")
    await add(conn, Schedule(name="p", type="echo", every_s=1, misfire="all"), now - timedelta(seconds=5))
    await scheduler.set_paused(conn, "p", True)
    assert await scheduler.fire_due(conn) == []
    record = await scheduler.set_paused(conn, "p", False)
    assert record.next_tick_at > now, "ticks passed while paused are not missed ticks"


def test_the_cli_manages_schedules(dsn: str) -> None:
    done = run_cli("schedule", "add", "report", "--cron", "0 2 * * *", "--timezone", "Europe/Berlin",
                   "--type", "echo", "--input", '{"kind": "nightly"}', "--misfire", "once", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("schedule report (0 2 * * *, Europe/Berlin): next run ")
    assert run_cli("schedule", "add", "tick", "--every", "30s", "--type", "noop", dsn=dsn).returncode == 0
    listed = json.loads(run_cli("schedule", "list", "--json", dsn=dsn).stdout)
    assert [(s["name"], s["expression"], s["misfire"], s["paused"]) for s in listed] == [
        ("report", "0 2 * * *", "once", False), ("tick", "every 30s", "skip", False)]
    assert listed[0]["next_run_at"].endswith(("+00:00", "Z")) and listed[0]["input_data"] == {"kind": "nightly"}
    assert json.loads(run_cli("schedule", "--json", "list", dsn=dsn).stdout) == listed, "--json before the verb too"
    assert "paused" in run_cli("schedule", "pause", "tick", dsn=dsn).stdout
    table = run_cli("schedule", "list", dsn=dsn).stdout.splitlines()
    assert table[0].split() == ["NAME", "WHEN", "TIMEZONE", "TYPE", "NEXT", "RUN", "LAST", "RUN", "STATE"]
    assert table[2].split()[-1] == "paused"
    assert run_cli("schedule", "resume", "tick", dsn=dsn).returncode == 0
    assert run_cli("schedule", "remove", "tick", dsn=dsn).stdout == "removed schedule tick\n"
    assert run_cli("schedule", "jobs", "report", dsn=dsn).stdout == "schedule report has created no job yet\n"


@pytest.mark.parametrize(("args", "code", "message"), [
    (["add", "x", "--cron", "61 * * * *", "--type", "echo"], 1, "jobdesk: error: schedule x: bad cron expression"),
    (["add", "x", "--every", "soon", "--type", "echo"], 2, "'soon' is not a duration"),
    (["add", "x", "--cron", "* * * * *", "--every", "1m", "--type", "echo"], 2, "not allowed with argument"),
    (["add", "x", "--every", "1m", "--type", "echo", "--timezone", "Nowhere"], 1, "unknown timezone 'Nowhere'"),
    (["pause", "ghost"], 1, "jobdesk: error: no schedule named ghost"),
])
def test_bad_schedule_commands_are_one_line(dsn: str, args: list[str], code: int, message: str) -> None:
    done = run_cli("schedule", *args, dsn=dsn)
    assert done.returncode == code and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert message in line


async def wait_for_count(dsn: str, sql: str, count: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await wait_for(lambda: conn.fetchval(f"SELECT ({sql}) >= $1", count), timeout=60, what=sql)
    finally:
        await conn.close()


def test_three_workers_make_exactly_one_job_per_tick_across_a_restart(dsn: str, tmp_path: Path) -> None:
    """A one-second schedule, three workers, all restarted in the middle: every tick from the
    first to the last has exactly one job (misfire all fills the gap of the restart)."""
    run_log = tmp_path / "runs.log"
    run_log.touch()
    assert run_cli("schedule", "add", "heartbeat", "--every", "1s", "--type", "test.record",
                   "--misfire", "all", dsn=dsn).returncode == 0

    def start() -> list[subprocess.Popen[str]]:
        workers = [start_worker(dsn, "--processors", "cli_processors", RUN_LOG=str(run_log),
                                JOB_PROCESSOR_POLL_INTERVAL="0.05") for _ in range(3)]
        # Up before the five seconds they run (a worker stopped while it starts dies of the signal).
        asyncio.run(wait_for_count(dsn, "SELECT count(*) FROM workers WHERE state = 'running'", 3))
        return workers

    def stop(workers: list[subprocess.Popen[str]]) -> None:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            assert w.wait(20) == 0

    workers = start()
    time.sleep(5)
    stop(workers)
    time.sleep(1.5)  # nobody runs: these ticks are missed
    workers = start()
    time.sleep(5)

    async def check() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            async def all_done() -> bool:
                return not await conn.fetchval("SELECT count(*) FROM jobs WHERE status <> 'completed'")

            await wait_for(all_done, timeout=15, what="the scheduled jobs to run")
            ticks = await conn.fetch("SELECT tick_at, job_id FROM schedule_ticks ORDER BY tick_at")
            jobs = await conn.fetchval("SELECT count(*) FROM jobs")
        finally:
            await conn.close()
        assert len(ticks) >= 9 and all(t["job_id"] for t in ticks)
        gaps = [(b["tick_at"] - a["tick_at"]).total_seconds() for a, b in zip(ticks, ticks[1:])]
        assert gaps == [1.0] * len(gaps), "one tick a second, none missing, none twice"
        assert jobs == len(ticks)
        runs = run_log.read_text().split()
        assert len(runs[::2]) == len(set(runs[::2])) == len(ticks), "each job ran once"

    try:
        asyncio.run(check())
    finally:
        stop(workers)


def test_a_processor_module_declares_schedules(dsn: str, tmp_path: Path) -> None:
    module = tmp_path / "nightly_reports.py"
    module.write_text(
        "from jobdesk import BaseProcessor, ProcessorResult, Schedule\n"
        "class Report(BaseProcessor):\n"
        "    async def process(self, job):\n"
        "        return ProcessorResult({'ok': True})\n"
        "PROCESSOR_MAP = {'report.build': Report}\n"
        "SCHEDULES = [Schedule(name='nightly-report', type='report.build', cron='0 2 * * *',\n"
        "                      timezone='Europe/Berlin', input_data={'scope': 'all'})]\n")
    worker = start_worker(dsn, "--processors", "nightly_reports", JOB_PROCESSOR_PATH=str(tmp_path))
    try:
        async def declared() -> list[dict[str, object]]:
            out = json.loads(run_cli("schedule", "list", "--json", dsn=dsn).stdout or "[]")
            return [s for s in out if s["name"] == "nightly-report"]

        [found] = asyncio.run(wait_for(declared, timeout=20, interval=0.3, what="the declared schedule"))
        assert found["source"] == "nightly_reports" and found["timezone"] == "Europe/Berlin"
        assert found["input_data"] == {"scope": "all"}
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0
