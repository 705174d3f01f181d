"""The two sides of `benchmarks/lifetime_bench.py`: a checkout of jobdesk for each, a private
embedded PostgreSQL per side, that checkout's commands (`migrate`, `worker`, `prune`) run with
this interpreter, and the schema-agnostic readings both sides share (CPU, WAL, size of `jobs`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import JOBS_SIZE_SQL, JOBS_TREE  # noqa: E402
from tests import pg  # noqa: E402

PROCESSORS = "benchmarks.bench_processors"  # each checkout's own copy, served as `bench.noop`
DATABASE = "lifetime"
DEAD_SQL = f"SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE relid IN ({JOBS_TREE})"
PARTS_SQL = f"SELECT count(*) FROM pg_class WHERE oid IN ({JOBS_TREE}) AND relkind = 'r'"  # that hold rows
TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Side:
    """One schema to measure: its name in the report and the checkout whose code runs it."""

    name: str
    checkout: Path
    label: str  # the ref or path, with its commit

    def env(self, dsn: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of this checkout's commands: its code first on the path, no JOB_* of ours."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOB")}
        env.update({"DATABASE_URL": dsn, "PYTHONPATH": str(self.checkout), "LOG_LEVEL": "WARNING"})
        return {**env, **(extra or {})}

    def run(self, dsn: str, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
        """`jobdesk ARGS` from this checkout; raises with its output when it fails."""
        done = subprocess.run([sys.executable, "-m", "jobdesk", *args], env=self.env(dsn), cwd=self.checkout,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: jobdesk {' '.join(args)} exited {done.returncode}:\n"
                               f"{done.stdout}{done.stderr}")
        return done

    def check_import(self) -> None:
        """That `import jobdesk` from this checkout's folder loads this checkout's code, not ours."""
        done = subprocess.run([sys.executable, "-c", "import jobdesk; print(jobdesk.__file__)"],
                              env=self.env(""), cwd=self.checkout, capture_output=True, text=True, check=True)
        loaded = Path(done.stdout.strip()).parent
        if not loaded.resolve().is_relative_to(self.checkout.resolve()):
            raise RuntimeError(f"{self.name}: `import jobdesk` in {self.checkout} loads {loaded}")


def _commit(path: Path) -> str:
    return subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def before_side(ref: str) -> Side:
    """A detached worktree of this repository at `ref` (made once, reused on later runs)."""
    path = Path(tempfile.gettempdir()) / f"jobdesk-lifetime-{ref.replace('/', '-')}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref], check=True,
                       capture_output=True)
    side = Side("before", path, f"{ref} ({_commit(path)})")
    side.check_import()
    return side


def after_side(path: str | None) -> Side:
    checkout = Path(path).resolve() if path else ROOT
    side = Side("after", checkout, f"{checkout} ({_commit(checkout)})")
    side.check_import()
    return side


@contextlib.asynccontextmanager
async def side_server(side: Side) -> AsyncIterator[tuple[str, int]]:
    """A fresh embedded PostgreSQL (durable commits, autovacuum at its defaults) holding one
    database that the side's `jobdesk migrate` made; yields its dsn and the postmaster's pid."""
    server, root = pg.start_server()
    try:
        conn = await asyncpg.connect(server.dsn_for("postgres"))
        try:
            await conn.execute(f"CREATE DATABASE {DATABASE}")
        finally:
            await conn.close()
        dsn = server.dsn_for(DATABASE)
        side.run(dsn, "migrate")
        postmaster = int((server.pgdata / "postmaster.pid").read_text().split()[0])
        yield dsn, postmaster
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- workers --------------------------------------------------------------------------------------

def start_workers(side: Side, dsn: str, count: int, concurrency: int, logs: Path) -> list[subprocess.Popen[bytes]]:
    """`count` worker processes of the side's checkout, completed jobs kept 60 s, pruned every 10 s."""
    env = side.env(dsn, {"MAX_CONCURRENT_JOBS": str(concurrency), "JOB_RETENTION_COMPLETED": "60s",
                         "JOB_PRUNE_INTERVAL": "10"})
    procs = []
    for i in range(count):
        out = (logs / f"{side.name}-worker-{i}.log").open("w")
        procs.append(subprocess.Popen([sys.executable, "-m", "jobdesk", "worker", "--processors", PROCESSORS],
                                      env=env, cwd=side.checkout, stdout=out, stderr=subprocess.STDOUT))
    return procs


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 30
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_workers(procs: list[subprocess.Popen[bytes]], logs: Path) -> None:
    """Raise, with the end of its log, if a worker has exited."""
    for i, proc in enumerate(procs):
        if proc.poll() is not None:
            tail = "".join(sorted(logs.glob(f"*-worker-{i}.log"))[0].read_text().splitlines(True)[-20:])
            raise RuntimeError(f"worker {i} exited with {proc.returncode}:\n{tail}")


# -- readings -------------------------------------------------------------------------------------

def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds (user + system) of the whole server so far: the postmaster, the children it has
    reaped (cutime, cstime: backends that have exited), and its children still alive."""
    total = sum(int(x) for x in _stat(postmaster)[11:15])
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                f = _stat(int(entry))
            except (OSError, ValueError):
                continue
            if int(f[1]) == postmaster:
                total += int(f[11]) + int(f[12])
    return total / TICK


def backend_cpu_s(pid: int) -> float:
    """CPU seconds of one live backend (the benchmark's own readings, left out of the server's)."""
    f = _stat(pid)
    return (int(f[11]) + int(f[12])) / TICK


async def lsn(conn: asyncpg.Connection) -> int:
    """The current WAL position, in bytes from the start."""
    return int(await conn.fetchval("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"))


async def jobs_size(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(JOBS_SIZE_SQL))


async def dead_tuples(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(DEAD_SQL))


async def leaf_count(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(PARTS_SQL))


def mb(n: float) -> str:
    return f"{n / 2**20:,.1f} MB"
