"""`jobdesk logs JOB_ID [--follow]` and the progress in `jobdesk show`, run as commands against a
worker in the test's loop, directly and through PgBouncer in transaction mode."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from tests.helpers import JOBDESK, ROOT, RunningWorker, cli_env, start_worker, wait_for
from tests.pgbouncer import PgBouncer
from tests.report_processors import Holds, Steps


async def jobdesk(*args: str, dsn: str, timeout: float = 60) -> tuple[int, str, str]:
    """Run the command without blocking the loop the worker runs in."""
    proc = await asyncio.create_subprocess_exec(*JOBDESK, *args, env=cli_env(dsn), cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_show_prints_the_progress_as_text_and_json(conn: asyncpg.Connection, dsn: str) -> None:
    holds = Holds()
    [job_id] = await transitions.enqueue(conn, [JobCreate("hold", {})])
    worker = RunningWorker(dsn, {"hold": holds})
    try:
        await wait_for(lambda: conn.fetchval("SELECT 1 FROM job_progress WHERE job_id = $1", job_id),
                       what="the progress to be written")
        code, out, err = await jobdesk("show", job_id, dsn=dsn)
        assert code == 0, err
        line = next(ln for ln in out.splitlines() if ln.strip().startswith("progress"))
        assert "40% rendered 40 of 100 frames" in line
        code, out, err = await jobdesk("show", job_id, "--json", dsn=dsn)
        progress = json.loads(out)["progress"]
        assert progress["fraction"] == 0.4 and progress["message"] == "rendered 40 of 100 frames"
        assert set(progress) == {"fraction", "message", "at"}
    finally:
        holds.release.set()
        await worker.stop()
    code, out, _ = await jobdesk("logs", job_id, dsn=dsn)
    assert code == 0 and out.rstrip().endswith("#1 INFO    job: rendering")


@pytest.mark.parametrize("pooled", [False, True], ids=["direct", "pgbouncer"])
async def test_logs_follow_prints_lines_as_they_come_and_ends_with_the_job(
        conn: asyncpg.Connection, dsn: str, pgbouncer: PgBouncer, pooled: bool) -> None:
    url = pgbouncer.url(dsn, declared=False) if pooled else dsn
    [job_id] = await transitions.enqueue(conn, [JobCreate("steps", {"steps": 8, "every": 0.3})])
    proc = await asyncio.create_subprocess_exec(*JOBDESK, "logs", job_id, "--follow", env=cli_env(url), cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    worker = RunningWorker(url, {"steps": Steps()})
    seen: list[tuple[str, str | None]] = []  # each line, and the job's status when it arrived
    try:
        async with asyncio.timeout(60):
            while line := (await proc.stdout.readline()).decode():
                seen.append((line.rstrip("\n"), await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)))
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await worker.stop()
    assert [text.split(": ", 1)[1] for text, _ in seen] == [f"step {i} of 8" for i in range(1, 9)]
    assert seen[0][1] == "in_progress", "the first lines came while the job ran"
    assert all(" #1 INFO    report.steps: " in text for text, _ in seen)


async def test_logs_of_a_missing_job_is_one_line_and_an_error(dsn: str) -> None:
    for follow in ((), ("--follow",)):
        code, out, err = await jobdesk("logs", "no-such-job", *follow, dsn=dsn)
        assert code != 0 and out == ""
        assert len(err.strip().splitlines()) == 1 and "no-such-job" in err and "Traceback" not in err


async def test_logs_follow_a_job_of_a_jobdesk_worker_process(conn: asyncpg.Connection, dsn: str,
                                                             tmp_path: Path) -> None:
    """The worker as operators run it (`jobdesk worker`, its logging set up by the command): the
    job's lines are kept and followed, and they still reach the worker's stderr too."""
    [job_id] = await transitions.enqueue(conn, [JobCreate("report.steps", {"steps": 5, "every": 0.3})])
    log_path = tmp_path / "worker.log"
    worker = start_worker(dsn, log_path=log_path, JOB_PROCESSOR_MODULES="report_processors")
    try:
        code, out, err = await jobdesk("logs", job_id, "--follow", "--json", dsn=dsn)
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert [ln["message"] for ln in lines] == [f"step {i} of 5" for i in range(1, 6)]
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "completed"
        code, out, _ = await jobdesk("show", job_id, "--json", dsn=dsn)
        assert json.loads(out)["progress"]["message"] == "step 5 of 5"
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.to_thread(worker.wait, 20)
    assert "report.steps: step 3 of 5" in log_path.read_text(), "the worker's stderr shows them as before"
