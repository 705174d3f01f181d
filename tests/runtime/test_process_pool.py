"""The pool of processes behind `executor = "process"`, on a real worker and PostgreSQL: a child
runs one job after another; it is replaced after JOB_PROCESS_MAX_TASKS runs, once its memory
passes JOB_PROCESS_MAX_MEMORY (each also by type), when it is killed at its time limit or on
cancel, and when it dies, which fails only its own job's attempt with the signal's name."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from jobdesk.core.models import JobCreate
from jobdesk.core.settings import load_settings
from jobdesk.runtime.processes import ended_how
from jobdesk.store import transitions
from tests.helpers import RunningWorker, run_cli, wait_for
from tests.runtime import offloop_processors as offloop
from tests.runtime import pool_processors as procs


async def _ended(conn: asyncpg.Connection, ids: list[str], status: str = "completed") -> bool:
    return await conn.fetchval("SELECT count(*) = $2 FROM jobs WHERE id = ANY($1::text[]) AND status = $3",
                               ids, len(ids), status)


async def _result(conn: asyncpg.Connection, job_id: str) -> dict[str, Any]:
    return dict(await conn.fetchval("SELECT result_data FROM jobs WHERE id = $1", job_id))


async def _run(conn: asyncpg.Connection, job: JobCreate, status: str = "completed") -> dict[str, Any]:
    """Enqueue one job, wait until it ends with `status`; its result."""
    await transitions.enqueue(conn, [job])
    await wait_for(lambda: _ended(conn, [job.id], status), what=f"job {job.type} to be {status}")
    return await _result(conn, job.id) if status == "completed" else {}


async def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _pids(runs: Path) -> list[int]:
    return [int(line.split()[2]) for line in runs.read_text().splitlines()]


async def test_one_child_runs_job_after_job(conn: asyncpg.Connection, dsn: str) -> None:
    jobs = [JobCreate("ids", {}) for _ in range(4)]
    await transitions.enqueue(conn, jobs)
    worker = RunningWorker(dsn, {"ids": procs.Ids()}, MAX_CONCURRENT_JOBS=1)
    try:
        await wait_for(lambda: _ended(conn, [j.id for j in jobs]), what="the jobs to complete")
    finally:
        await worker.stop()
    results = [await _result(conn, j.id) for j in jobs]
    assert len({r["pid"] for r in results}) == 1 and results[0]["pid"] != os.getpid()
    assert sorted(r["runs_here"] for r in results) == [1, 2, 3, 4]
    # What a job was, and what its processor set on it, is not the next job's.
    assert not any(r["inherited"] or r["cancelled"] for r in results)
    await wait_for(lambda: _gone(results[0]["pid"]), what="the idle child to end with the worker")


@pytest.mark.parametrize(("settings", "runs_per_child"), [
    ({"JOB_PROCESS_MAX_TASKS": "2"}, [1, 2, 2]),
    ({"JOB_PROCESS_MAX_TASKS": "1", "JOB_TYPE_PROCESS_MAX_TASKS": "ids=3"}, [2, 3]),
])
async def test_a_child_is_replaced_after_its_max_tasks(conn: asyncpg.Connection, dsn: str,
                                                       settings: dict[str, str], runs_per_child: list[int]) -> None:
    jobs = [JobCreate("ids", {}) for _ in range(5)]
    await transitions.enqueue(conn, jobs)
    worker = RunningWorker(dsn, {"ids": procs.Ids()}, MAX_CONCURRENT_JOBS=1, **settings)
    try:
        await wait_for(lambda: _ended(conn, [j.id for j in jobs]), what="the jobs to complete")
    finally:
        await worker.stop()
    runs: dict[int, int] = {}
    for job in jobs:
        pid = (await _result(conn, job.id))["pid"]
        runs[pid] = runs.get(pid, 0) + 1
    assert sorted(runs.values()) == runs_per_child


async def test_a_child_is_replaced_once_its_memory_passes_the_limit(conn: asyncpg.Connection, dsn: str) -> None:
    # Every child is past 1 MiB: a type without its own limit gets a fresh child each run.
    # `holds` has its own limit, 300 MiB, which a child passes only once a job keeps 320 MiB.
    worker = RunningWorker(dsn, {"ids": procs.Ids(), "holds": procs.Holds()}, MAX_CONCURRENT_JOBS=1,
                           JOB_PROCESS_MAX_MEMORY="1MB", JOB_TYPE_PROCESS_MAX_MEMORY="holds=300MB")
    try:
        first = await _run(conn, JobCreate("ids", {}))
        second = await _run(conn, JobCreate("ids", {}))
        small = [await _run(conn, JobCreate("holds", {"mb": 0})) for _ in range(2)]
        big = await _run(conn, JobCreate("holds", {"mb": 320}))
        after = await _run(conn, JobCreate("holds", {"mb": 0}))
    finally:
        await worker.stop()
    assert first["pid"] != second["pid"]
    assert small[0]["rss"] < 300 * 1024 * 1024 < big["rss"]
    assert small[0]["pid"] == small[1]["pid"] == big["pid"] != after["pid"]
    await wait_for(lambda: _gone(big["pid"]), what="the child past its memory limit to end")


@pytest.mark.parametrize("signal_name", ["SIGSEGV", "SIGKILL"])
async def test_a_death_fails_only_its_attempt_and_a_fresh_child_runs_the_retry(
        conn: asyncpg.Connection, dsn: str, tmp_path: Path, signal_name: str) -> None:
    runs = tmp_path / "runs"
    worker = RunningWorker(dsn, {"ids": procs.Ids(), "crashes": procs.SegfaultsFirst()}, MAX_CONCURRENT_JOBS=1,
                           JOB_RETRY_INTERVALS=[0.1])
    try:
        before = await _run(conn, JobCreate("ids", {"runs": str(runs)}))
        crash = JobCreate("crashes", {"runs": str(runs), "signal": signal_name})
        retried = await _run(conn, crash)
        after = await _run(conn, JobCreate("ids", {"runs": str(runs)}))
    finally:
        await worker.stop()
    attempts = await conn.fetch("SELECT outcome, error_message FROM job_attempts WHERE job_id = $1 ORDER BY attempt",
                                crash.id)
    assert [(a["outcome"], a["error_message"]) for a in attempts] == [
        ("failed", f"ChildDied: the process running job {crash.id} was killed by {signal_name}")]
    assert await conn.fetchval("SELECT attempts FROM jobs WHERE id = $1", crash.id) == 2
    crashed_in = _pids(runs)[1]
    assert crashed_in == before["pid"], "the crash happened in the reused child"
    assert retried["pid"] != crashed_in and after["pid"] == retried["pid"]
    assert await _gone(crashed_in)


async def test_an_idle_child_that_died_is_replaced_before_the_next_job(conn: asyncpg.Connection, dsn: str) -> None:
    worker = RunningWorker(dsn, {"ids": procs.Ids()}, MAX_CONCURRENT_JOBS=1)
    try:
        before = await _run(conn, JobCreate("ids", {}))
        os.kill(before["pid"], signal.SIGKILL)  # as the OOM killer would, between two jobs
        await wait_for(lambda: _dead(before["pid"]), what="the idle child to die")
        job = JobCreate("ids", {})
        after = await _run(conn, job)
    finally:
        await worker.stop()
    assert after["pid"] != before["pid"] and after["runs_here"] == 1
    assert await conn.fetchval("SELECT attempts FROM jobs WHERE id = $1", job.id) == 1, "no attempt failed"


async def _dead(pid: int) -> bool:
    """The process has ended: gone, or a zombie its parent has not waited for yet (Linux)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


async def test_a_child_killed_at_its_time_limit_is_replaced(conn: asyncpg.Connection, dsn: str,
                                                             tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    worker = RunningWorker(dsn, {"ids": procs.Ids(), "hangs": offloop.HangsInProcess()}, MAX_CONCURRENT_JOBS=1,
                           JOB_RETRY_INTERVALS=[])
    try:
        before = await _run(conn, JobCreate("ids", {}))
        await _run(conn, JobCreate("hangs", {"runs": str(runs)}), status="failed")
        after = await _run(conn, JobCreate("ids", {}))
    finally:
        await worker.stop()
    assert _pids(runs) == [before["pid"]], "the hung job ran in the reused child"
    assert after["pid"] != before["pid"] and after["runs_here"] == 1
    await wait_for(lambda: _gone(before["pid"]), what="the killed child to end")


async def test_a_cancelled_job_that_goes_on_has_its_child_replaced(conn: asyncpg.Connection, dsn: str,
                                                                    tmp_path: Path) -> None:
    runs, flag = tmp_path / "runs", tmp_path / "flag"
    worker = RunningWorker(dsn, {"ids": procs.Ids(), "ignores": procs.IgnoresCancel(),
                                 "waits": offloop.WaitsForCancelInProcess()}, MAX_CONCURRENT_JOBS=1)
    try:
        before = await _run(conn, JobCreate("ids", {}))
        stubborn = JobCreate("ignores", {"runs": str(runs)})
        await transitions.enqueue(conn, [stubborn])
        await wait_for(lambda: _has_text(runs), what="the job to start")
        await transitions.cancel(conn, [stubborn.id], transitions.Actor("api", "tester"))
        await wait_for(lambda: _ended(conn, [stubborn.id], "cancelled"), what="the cancel")
        after = await _run(conn, JobCreate("ids", {}))
        # A job that stops when cancelled; the job after it is not cancelled, in whichever child.
        polite = JobCreate("waits", {"flag": str(flag), "runs": str(tmp_path / "polite")})
        await transitions.enqueue(conn, [polite])
        await wait_for(lambda: _has_text(tmp_path / "polite"), what="the polite job to start")
        await transitions.cancel(conn, [polite.id], transitions.Actor("api", "tester"))
        await wait_for(lambda: _ended(conn, [polite.id], "cancelled"), what="the second cancel")
        last = await _run(conn, JobCreate("ids", {}))
    finally:
        await worker.stop()
    assert _pids(runs) == [before["pid"]]
    assert after["pid"] != before["pid"] and after["runs_here"] == 1
    await wait_for(lambda: _gone(before["pid"]), what="the killed child to end")
    assert flag.read_text() == "cancelled" and last["cancelled"] is False


async def _has_text(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


def test_a_death_names_its_signal() -> None:
    assert ended_how(-signal.SIGSEGV) == "was killed by SIGSEGV"
    assert ended_how(-signal.SIGKILL) == "was killed by SIGKILL"
    assert ended_how(3) == "exited with code 3 without a result"


def test_the_recycling_settings_are_read_with_their_units() -> None:
    settings = load_settings(JOB_PROCESS_MAX_TASKS="500", JOB_TYPE_PROCESS_MAX_TASKS="video.render=10",
                             JOB_PROCESS_MAX_MEMORY="512MB", JOB_TYPE_PROCESS_MAX_MEMORY="video.render=2GB,t=1.5G")
    assert settings.JOB_PROCESS_MAX_TASKS == 500 and settings.JOB_TYPE_PROCESS_MAX_TASKS == {"video.render": 10}
    assert settings.JOB_PROCESS_MAX_MEMORY == 512 * 1024**2
    assert settings.JOB_TYPE_PROCESS_MAX_MEMORY == {"video.render": 2 * 1024**3, "t": 1536 * 1024**2}
    unset = load_settings()
    assert unset.JOB_PROCESS_MAX_TASKS is None and unset.JOB_PROCESS_MAX_MEMORY is None
    assert load_settings(JOB_PROCESS_MAX_MEMORY="", JOB_PROCESS_MAX_TASKS="").JOB_PROCESS_MAX_MEMORY is None


@pytest.mark.parametrize(("name", "value"), [
    ("JOB_PROCESS_MAX_MEMORY", "lots"), ("JOB_PROCESS_MAX_MEMORY", "0MB"), ("JOB_PROCESS_MAX_TASKS", "0"),
    ("JOB_TYPE_PROCESS_MAX_MEMORY", "video.render=2QB"), ("JOB_TYPE_PROCESS_MAX_TASKS", "video.render"),
])
def test_a_malformed_recycling_setting_gets_one_line_naming_it(name: str, value: str) -> None:
    done = run_cli("worker", dsn=None, **{name: value})
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"invalid setting {name}:" in lines[0] and "Traceback" not in done.stderr, done.stderr
