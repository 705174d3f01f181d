"""A real PostgreSQL for the tests: one embedded server per session, one database per test."""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from jobdesk.embedded.server import EmbeddedServer
from jobdesk.store.migrations import migrate

TEMPLATE = "jobdesk_template"
_counter = itertools.count(1)


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def start_server() -> tuple[EmbeddedServer, Path]:
    # Short path: the Unix socket path must stay under ~100 characters.
    root = Path(tempfile.mkdtemp(prefix="jdtest-"))
    root.chmod(0o755)  # our own folder; the server may run as an unprivileged user
    server = EmbeddedServer(root)
    server.ensure_running()
    return server, root


async def skip_fsync(dsn: str) -> None:
    """Turn off `fsync` on a test server: a commit then waits for no disk flush. What a crash of
    PostgreSQL or of a client leaves behind is the same (the WAL is still written before each
    commit returns); only a crash of the whole machine could lose data, and the server is thrown
    away with the run. The benchmarks' servers keep durable commits."""
    conn = await asyncpg.connect(with_database(dsn, "postgres"))
    try:
        await conn.execute("ALTER SYSTEM SET fsync = off")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


async def build_template(dsn: str) -> None:
    conn = await asyncpg.connect(with_database(dsn, "postgres"))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE}")
        await conn.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await conn.close()
    conn = await asyncpg.connect(with_database(dsn, TEMPLATE))
    try:
        await migrate(conn)
    finally:
        await conn.close()


async def create_test_database(dsn: str) -> str:
    """A fresh copy of the template: the one made ahead for `dsn`, when spares are made for it."""
    if _spares is not None and _spares.dsn == dsn:
        made = await asyncio.to_thread(_spares.take)
        if made is not None:
            return made
    return await _copy_template(dsn)


async def create_empty_database(dsn: str) -> str:
    """A new database on `dsn`'s server with no migration applied (drop it with drop_test_database)."""
    return await _create_database(dsn, "jdempty", "")


async def _copy_template(dsn: str) -> str:
    return await _create_database(dsn, "jdtest", f" TEMPLATE {TEMPLATE}")


async def _create_database(dsn: str, prefix: str, template: str) -> str:
    name = f"{prefix}_{os.getpid()}_{next(_counter)}"
    conn = await asyncpg.connect(with_database(dsn, "postgres"))
    try:
        await conn.execute(f"CREATE DATABASE {name}{template}")
    finally:
        await conn.close()
    return with_database(dsn, name)


class Spares:
    """The next test's database, made ahead by a thread of its own while a test runs: the test then
    starts without waiting for CREATE DATABASE. One spare at a time; while the server is down (a
    test stops it), the thread tries again every 0.2 s."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.ready: queue.Queue[str] = queue.Queue(maxsize=1)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="spare-databases", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                made = asyncio.run(_copy_template(self.dsn))
            except Exception:  # noqa: BLE001 - the server away, for one: try again
                self.stopping.wait(0.2)
                continue
            while not self.stopping.is_set():
                try:
                    self.ready.put(made, timeout=0.2)
                    break
                except queue.Full:
                    continue

    def take(self) -> str | None:
        """The spare, once made; None if none came within a minute (the caller makes its own)."""
        try:
            return self.ready.get(timeout=60)
        except queue.Empty:
            return None

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


_spares: Spares | None = None


def make_spares(dsn: str) -> None:
    """From now on, `create_test_database(dsn)` takes databases made ahead."""
    global _spares
    _spares = Spares(dsn)


def stop_spares() -> None:
    global _spares
    if _spares is not None:
        _spares.stop()
        _spares = None


async def drop_test_database(dsn: str) -> None:
    name = urlsplit(dsn).path.lstrip("/")
    conn = await asyncpg.connect(with_database(dsn, "postgres"))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await conn.close()
