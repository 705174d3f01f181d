"""A primary and a streaming standby from the embedded binaries, on loopback TCP, for the tests
of failover: the standby is made by `pg_basebackup -R`, replication is synchronous, the primary
can be killed with SIGKILL (the postmaster and every process it started, as if its machine died)
and the standby promoted with `pg_ctl promote`."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from jobdesk.core.paths import program_env
from jobdesk.embedded import binaries
from jobdesk.embedded.status import alive
from tests.helpers import child_pids, free_port

DATABASE = "jobdesk"


class Node:
    """One server of the pair: its data folder, its port, its process."""

    def __init__(self, pair: Pair, name: str) -> None:
        self.pair = pair
        self.name = name
        self.pgdata = pair.root / name
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@{self.host}/{database}?sslmode=disable"

    def initdb(self) -> None:
        """A new, empty cluster in this node's data folder (superuser postgres, trust on loopback)."""
        self.pair.run("initdb", "-D", str(self.pgdata), "-U", "postgres", "-E", "UTF8", "--locale=C",
                      "--auth=trust", "--no-instructions")

    def start(self, *settings: str) -> None:
        argv = [str(self.pair.bin_dir / "postgres"), "-D", str(self.pgdata), "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.pair.root}",
                "-c", "max_connections=100", "-c", "shared_buffers=64MB", "-c", "fsync=off",
                *[arg for s in settings for arg in ("-c", s)]]
        log = open(self.pair.root / f"{self.name}.log", "ab")
        try:
            self.process = subprocess.Popen(self.pair.user.wrap(argv, pdeathsig=True), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, env=program_env())
        finally:
            log.close()
        deadline = time.monotonic() + 60
        while not self.ready():
            assert self.process.poll() is None, self.log_tail()
            assert time.monotonic() < deadline, f"{self.name} did not start: {self.log_tail()}"
            time.sleep(0.05)

    def ready(self) -> bool:
        argv = [str(self.pair.bin_dir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port),
                "-U", "postgres", "-d", "postgres"]
        return subprocess.run(argv, env=program_env(), capture_output=True).returncode == 0

    def kill(self) -> None:
        """SIGKILL to the server and all its processes at once, and back when they are gone.

        PostgreSQL makes each process it starts a session leader of its own: a signal to the
        postmaster's process group reaches none of them, and a backend left running answers its
        client until it notices that the postmaster is gone."""
        if self.process is None or self.process.poll() is not None:
            return
        children = child_pids(self.process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait()
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in children):
            assert time.monotonic() < deadline, f"{self.name}: processes left after SIGKILL"
            time.sleep(0.01)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def promote(self) -> None:
        self.pair.run("pg_ctl", "promote", "-D", str(self.pgdata), "-w", "-t", "60")

    def psql(self, sql: str, database: str = DATABASE) -> str:
        return self.pair.run("psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                             "-d", database, "-tAc", sql)

    def log_tail(self) -> str:
        path = self.pair.root / f"{self.name}.log"
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-5:]) if path.exists() else ""


class Pair:
    """A primary (`primary`) with a synchronous standby (`standby`), both running."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="jdrep-"))
        self.root.chmod(0o755)
        self.user = binaries.server_user()
        self.bin_dir = binaries.reachable_bin_dir(self.user, binaries.pg_bin_dir(), self.root)
        if self.user.name is not None:
            os.chown(self.root, self.user.uid, self.user.gid)
        self.primary = Node(self, "primary")
        self.standby = Node(self, "standby")

    def run(self, program: str, *args: str) -> str:
        done = subprocess.run(self.user.wrap([str(self.bin_dir / program), *args]), capture_output=True,
                              text=True, env=program_env(), cwd=self.root)
        assert done.returncode == 0, f"{program} failed: {done.stderr or done.stdout}"
        return done.stdout.strip()

    def start(self, *, synchronous: bool = True) -> Pair:
        self.primary.initdb()
        self.primary.start("wal_level=replica", "max_wal_senders=5")
        self.primary.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
        self.run("pg_basebackup", "-D", str(self.standby.pgdata), "-h", "127.0.0.1", "-p", str(self.primary.port),
                 "-U", "postgres", "-R", "-X", "stream", "-c", "fast")
        self.standby.start("hot_standby=on")
        deadline = time.monotonic() + 30
        while self.primary.psql("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
                                database="postgres") != "1":
            assert time.monotonic() < deadline, "the standby did not start streaming"
            time.sleep(0.1)
        if synchronous:  # only now: until a standby streams, every commit would wait for it
            self.primary.psql("ALTER SYSTEM SET synchronous_standby_names = '*'", database="postgres")
            self.primary.psql("SELECT pg_reload_conf()", database="postgres")
        return self

    def url(self, *extra: str) -> str:
        """The two-host URL of the libpq form, writable primary first found."""
        query = "&".join(["target_session_attrs=read-write", "sslmode=disable", *extra])
        return f"postgresql://postgres@{self.primary.host},{self.standby.host}/{DATABASE}?{query}"

    def stop(self) -> None:
        self.standby.stop()
        self.primary.stop()
        shutil.rmtree(self.root, ignore_errors=True)
