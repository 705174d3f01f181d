"""A real PgBouncer (Debian's package) in transaction pooling mode in front of the test server.

It runs as the user the test PostgreSQL runs as (PgBouncer refuses to run as root), so that it
can reach the server's Unix socket in its private folder, and listens on loopback TCP. Every
database of the server is reachable through it under its own name.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from jobdesk.console.platform_check import install_debian_packages
from jobdesk.embedded.server import EmbeddedServer

SERVER_POOL_SIZE = 4  # server sessions per database: fewer than the clients, so they are shared


def ensure_installed() -> str:
    """The pgbouncer binary; installed with apt-get where it is missing (CI runs as root)."""
    found = shutil.which("pgbouncer") or (os.path.exists("/usr/sbin/pgbouncer") and "/usr/sbin/pgbouncer")
    if found:
        return found
    assert install_debian_packages(["pgbouncer"], why="for the tests behind a pooler"), \
        "pgbouncer is missing and apt-get could not install it (the tests install it as root)"
    # The package starts its own service on port 6432; ours has its own config and port.
    subprocess.run(["service", "pgbouncer", "stop"], capture_output=True)
    return shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgBouncer:
    """One PgBouncer process; `url(direct_dsn)` is the same database through it."""

    def __init__(self, server: EmbeddedServer) -> None:
        self.server = server
        self.root = Path(tempfile.mkdtemp(prefix="jdpgb-"))
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PgBouncer:
        binary = ensure_installed()
        self.root.chmod(0o755)
        users = self.root / "users.txt"
        users.write_text('"postgres" ""\n')
        ini = self.root / "pgbouncer.ini"
        ini.write_text(f"""[databases]
* = host={self.server.socket_dir} port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {users}
pool_mode = transaction
default_pool_size = {SERVER_POOL_SIZE}
max_client_conn = 1000
logfile = {self.root}/pgbouncer.log
""")
        for path in (users, ini):
            path.chmod(0o644)
        argv = [binary, "-q", str(ini)]
        user = self.server.user
        if user.name is not None:  # as root: drop to the server's own unprivileged user
            (self.root / "pgbouncer.log").touch()
            os.chown(self.root / "pgbouncer.log", user.uid, user.gid)
            argv = ["setpriv", "--reuid", str(user.uid), "--regid", str(user.gid), "--clear-groups", "--", *argv]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.root / "pgbouncer.log").read_text() if (self.root / "pgbouncer.log").exists() else ""
                    raise RuntimeError(f"pgbouncer did not start: {log[-2000:]}") from None
                time.sleep(0.05)

    def url(self, direct_dsn: str, *, declared: bool = True) -> str:
        """The database of `direct_dsn` through PgBouncer, with `?pgbouncer=true` when `declared`."""
        database = urlsplit(direct_dsn).path.lstrip("/")
        query = "sslmode=disable" + ("&pgbouncer=true" if declared else "")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}?{query}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
