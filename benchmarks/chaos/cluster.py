"""What a chaos case runs on: one PostgreSQL server from the embedded binaries (a raw server, so
that it can be restarted and its connection slots counted), a fresh database per case, and the
worker processes, real `python -m jobdesk.cli worker` subprocesses in process groups of their own."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from benchmarks.chaos.processors import RUNS_DIR_ENV
from tests import pg
from tests.replication import DATABASE, Node, Pair

ROOT = Path(__file__).resolve().parents[2]
PROCESSORS = "benchmarks.chaos.processors"
MAX_CONNECTIONS = 100  # PostgreSQL's default: 300 idle connections more than exhaust it
DRIVER_APP = "chaos-driver"  # application_name of the suite's own connections, spared by the faults


class Server:
    """One PostgreSQL server on loopback TCP, restartable, with the migrated template database."""

    def __init__(self) -> None:
        self.pair = Pair()
        self.node: Node = self.pair.primary
        self.settings = (f"max_connections={MAX_CONNECTIONS}",)

    def start(self) -> None:
        self.node.initdb()
        self.node.start(*self.settings)

    def restart(self) -> None:
        """A fast shutdown (SIGINT: every connection is closed) and a start, as `pg_ctl restart`."""
        self.node.stop()
        self.node.start(*self.settings)

    def dsn(self, database: str = DATABASE) -> str:
        return self.node.dsn(database)

    def stop(self) -> None:
        self.node.stop()
        shutil.rmtree(self.pair.root, ignore_errors=True)


async def build_template(server: Server) -> None:
    await pg.build_template(server.dsn("postgres"))


async def fresh_database(server: Server, name: str) -> str:
    conn = await asyncpg.connect(server.dsn("postgres"))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {name} TEMPLATE {pg.TEMPLATE}")
    finally:
        await conn.close()
    return server.dsn(name)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the suite's process dies, however it dies."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Workers:
    """The worker processes of one case; `kill` is SIGKILL to one worker's process group."""

    dsn: str
    runs_dir: Path
    env_extra: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    killed: list[tuple[int, float]] = field(default_factory=list)  # (pid, unix time)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JOB", "DATABASE", "DB_"))}
        env.update({"DATABASE_URL": self.dsn, "MAX_CONCURRENT_JOBS": "10", "LOG_LEVEL": "WARNING",
                    "PYTHONPATH": str(ROOT), RUNS_DIR_ENV: str(self.runs_dir),
                    "JOB_RETENTION_COMPLETED": "forever", **self.env_extra})
        return env

    def start(self, name: str) -> None:
        log = open(self.runs_dir / f"worker-{name}.log", "ab")
        try:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "jobdesk.cli", "worker", "--processors", PROCESSORS],
                env=self.env(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent)
        finally:
            log.close()

    def kill(self, name: str) -> int:
        proc = self.procs[name]
        self.killed.append((proc.pid, time.time()))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return proc.pid

    def stop_all(self) -> None:
        """SIGTERM to every worker, SIGKILL to any still running 30 s later."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
