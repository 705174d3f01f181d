"""The unprivileged system user the embedded server runs as when jobdesk runs as root.

PostgreSQL refuses to run as root, so a root process starts it as `jobdesk-pg`, created on first
use. Several processes may start at once on a new machine (two test processes, two commands with
different data folders); `useradd` run concurrently can leave one caller reading a user id that
the other then replaces. So the creation is serialised by a file lock shared by every jobdesk
process on the machine, and the user is read back only after the lock is released.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from jobdesk.core.errors import EmbeddedDatabaseError
from jobdesk.core.paths import program_env

SERVER_USER = "jobdesk-pg"


def lock_path() -> Path:
    """The machine-wide lock file of user creation (root's, so in /run/lock when it exists)."""
    run_lock = Path("/run/lock")
    base = run_lock if run_lock.is_dir() and os.access(run_lock, os.W_OK) else Path(tempfile.gettempdir())
    return base / "jobdesk-useradd.lock"


def ensure_system_user(name: str = SERVER_USER) -> pwd.struct_passwd:
    """The system user `name`, created once if it does not exist; safe to call from many processes."""
    with open(lock_path(), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(name)
        except KeyError:
            _useradd(name)
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise EmbeddedDatabaseError(f"the system user {name} was created but cannot be found") from None


def _useradd(name: str) -> None:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    done = subprocess.run([useradd, "--system", "--no-create-home", "--user-group",
                           "--shell", "/usr/sbin/nologin", name],
                          capture_output=True, text=True, env=program_env(), check=False)
    if done.returncode != 0 and "already exists" not in done.stderr:
        raise EmbeddedDatabaseError(f"could not create the system user {name}: {done.stderr.strip()}")
