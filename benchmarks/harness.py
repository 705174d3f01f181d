"""What the benchmarks share: a private embedded PostgreSQL with one fresh database to measure
on, percentiles, and a probe of how late the event loop runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobdesk.embedded.server import EmbeddedServer
from tests import pg


def server_cpu_seconds(pgdata: Path) -> float:
    """CPU seconds (user + system) used so far by the PostgreSQL server of `pgdata`: its
    postmaster and every process it started that is still alive (the connections' backends
    end with their connections, so read this while the measured clients are connected)."""
    try:
        postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = _stat_fields(stat.read_text())
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if postmaster in (pid, ppid):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by one process, such as a connection's backend."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat").read_text())
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stat_fields(text: str) -> list[str]:
    """The fields of a /proc/PID/stat line after the command's name, which may hold spaces."""
    return text[text.rindex(")") + 2:].split()


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class LoopLag:
    """From start() to stop(), how much later than asked a 10 ms sleep wakes, in ms: what a
    console user feels as lag."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._probe())

    async def _probe(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            self.lags.append((time.perf_counter() - t - 0.01) * 1000)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    def describe(self) -> str:
        return (f"LOOP LAG p50 {pct(self.lags, 50):.1f} ms, p99 {pct(self.lags, 99):.1f} ms, "
                f"max {max(self.lags):.1f} ms over {len(self.lags):,} samples")


@contextlib.contextmanager
def private_server() -> Iterator[EmbeddedServer]:
    """A private embedded PostgreSQL in a temporary folder, removed on exit. Its databases come
    from a template that `pg.build_template(server.dsn)` makes, once, before `fresh_database`."""
    server, root = pg.start_server()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.asynccontextmanager
async def fresh_database(server_dsn: str) -> AsyncIterator[str]:
    """A fresh, migrated database on a `private_server`; yields its dsn and drops it on exit."""
    dsn = await pg.create_test_database(server_dsn)
    try:
        yield dsn
    finally:
        await pg.drop_test_database(dsn)


def on_fresh_database(body: Callable[[str], Awaitable[None]], *, qt: bool = False) -> None:
    """Start a private embedded PostgreSQL, run body(dsn) on a fresh, migrated database, then
    remove the server. With `qt`, body runs on a qasync loop under a QApplication (offscreen
    unless QT_QPA_PLATFORM says otherwise)."""
    with private_server() as server:

        async def everything() -> None:
            await pg.build_template(server.dsn)
            await body(await pg.create_test_database(server.dsn))

        if qt:
            import qasync
            from PySide6.QtWidgets import QApplication

            app = QApplication.instance() or QApplication([sys.argv[0]])
            app.setQuitOnLastWindowClosed(False)  # type: ignore[attr-defined]
            qasync.run(everything())
            del app
        else:
            asyncio.run(everything())



# Every relation of `jobs`: the partitioned table and each of its partitions at any depth when it is
# partitioned (sql/041); pg_partition_tree lists nothing for a plain table, hence `jobs` itself beside it.
JOBS_TREE = "SELECT relid FROM pg_partition_tree('jobs') UNION SELECT 'jobs'::regclass"
JOBS_SIZE_SQL = f"SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::bigint FROM ({JOBS_TREE}) t"
