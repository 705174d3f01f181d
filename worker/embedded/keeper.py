"""The keeper of the embedded PostgreSQL: one small process per data folder that runs the server
as its child, counts the server's clients every few seconds and stops it cleanly once it has had
none for the idle time.

The first jobdesk process that needs the server starts a keeper detached (`jobdesk db keeper`,
hidden, which works from a Python install and from the bundle alike); `jobdesk db` in the
foreground is a keeper too, one that runs until Ctrl-C or SIGTERM. Locks in the data folder keep
it to one and tell it who uses it: `keeper.lock`, held for the keeper's whole life; `start.lock`,
held by whoever starts a server and by the keeper while it decides to stop and stops, so a process
arriving at that moment waits and then starts a fresh server instead of connecting to a dying one;
and `clients.lock`, held shared by every process that uses the server, for its whole life, so a
process whose pool has closed its idle connections still counts as a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO

import asyncpg

from jobdesk.core.errors import JobdeskError
from jobdesk.core.timefmt import span
from jobdesk.embedded.server import EmbeddedServer
from jobdesk.embedded.status import KEEPER_APP, Client, KeeperState, fetch_clients, write_state

log = logging.getLogger("jobdesk.embedded")


def check_interval(idle_stop_s: float | None) -> float:
    """Often enough that the server stops close to its idle time; never busier than 5 a second."""
    if idle_stop_s is None:
        return 2.0
    return max(0.2, min(2.0, idle_stop_s / 4))


class Keeper:
    """Runs one server and stops it after `idle_stop_s` without a client (None: never by itself)."""

    def __init__(self, server: EmbeddedServer, idle_stop_s: float | None) -> None:
        self.server = server
        self.idle_stop_s = idle_stop_s
        self.interval = check_interval(idle_stop_s)
        self.started_at = time.time()
        self.last_active = self.started_at
        self._keeper_lock: IO[str] | None = None

    # -- starting ---------------------------------------------------------------------------

    def start_in_foreground(self) -> bool:
        """Start the server unless one runs; False if it already did (someone else keeps it)."""
        self.server.prepare_folders()
        with self.server.start_lock():
            if self.server.is_ready():
                return False
            self.server.initdb()
            self.start()
        return True

    def start(self) -> None:
        """Take the keeper lock and start the server (the caller holds the start lock)."""
        handle = open(self.server.root / "keeper.lock", "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise JobdeskError(f"another keeper already runs the embedded PostgreSQL in {self.server.root}") from None
        self._keeper_lock = handle
        try:
            self.server.start_child()
        except BaseException:
            self._release()
            raise
        self._write_state([], time.time())

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> int:
        """Watch the clients until the idle time passes or a stop is asked for; 1 if the server died."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        idle = "never by itself" if self.idle_stop_s is None else f"after {span(self.idle_stop_s)} without a client"
        log.info("embedded PostgreSQL running in %s (pid %s); it stops %s",
                 self.server.root, self.server.process and self.server.process.pid, idle)
        conn: asyncpg.Connection | None = None
        code = 0
        try:
            while True:
                proc = self.server.process
                if proc is None or proc.poll() is not None:
                    log.error("the embedded PostgreSQL exited by itself (see %s)", self.server.log_path)
                    code = 1
                    break
                clients, conn = await self._clients(conn)
                now = time.time()
                if clients is None or clients or self.server.in_use():  # or no way to tell: not idle
                    self.last_active = now
                self._write_state(clients or [], now)
                if self._idle(now) and await self._stop_if_still_idle(conn):
                    log.info("no client for %s; stopped the embedded PostgreSQL", span(self.idle_stop_s or 0))
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await stop.wait()
                if stop.is_set():
                    log.info("asked to stop; stopping the embedded PostgreSQL")
                    break
        finally:
            if conn is not None:
                try:
                    await conn.close(timeout=2)
                except Exception as exc:  # noqa: BLE001 - the server may be gone already; stopped anyway
                    log.debug("closing the keeper's own connection failed: %s", exc)
            if self._keeper_lock is not None:  # not stopped for idleness already
                with self.server.start_lock():
                    self._shut_down()
        return code

    def _shut_down(self) -> None:
        """Stop the server and let go of the keeper lock, all under the start lock (the caller's):
        a starter then finds either a live keeper with its server, or none at all."""
        self.server.stop_child()
        with contextlib.suppress(OSError):
            self.server.state_path.unlink()
        self._release()

    def _idle(self, now: float) -> bool:
        return self.idle_stop_s is not None and now - self.last_active >= self.idle_stop_s

    async def _stop_if_still_idle(self, conn: asyncpg.Connection | None) -> bool:
        """Under the start lock, so that no process starts using the server meanwhile: look again,
        and stop."""
        with self.server.start_lock():
            clients, _ = await self._clients(conn)
            if clients is None or clients or self.server.in_use():
                self.last_active = time.time()
                return False
            if conn is not None:
                conn.terminate()
            self._shut_down()
            return True

    async def _clients(self, conn: asyncpg.Connection | None) -> tuple[list[Client] | None,
                                                                        asyncpg.Connection | None]:
        """The server's clients, or None when the server does not answer now."""
        try:
            if conn is None or conn.is_closed():
                conn = await asyncpg.connect(self.server.dsn_for("postgres"), timeout=5,
                                             server_settings={"application_name": KEEPER_APP})
            return await fetch_clients(conn), conn
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            log.debug("cannot count clients now: %s", exc)
            if conn is not None:
                conn.terminate()
            return None, None

    def _write_state(self, clients: list[Client], now: float) -> None:
        proc = self.server.process
        state: KeeperState = {"keeper_pid": os.getpid(), "postmaster_pid": proc.pid if proc else None,
                              "started_at": self.started_at, "idle_stop_s": self.idle_stop_s,
                              "clients": [c.to_json() for c in clients], "last_active": self.last_active,
                              "checked_at": now}
        write_state(self.server.state_path, state)

    def _release(self) -> None:
        if self._keeper_lock is not None:
            self._keeper_lock.close()
            self._keeper_lock = None


def _tell_starter(line: str) -> None:
    """Answer the process that started us on our stdout, then let go of that pipe for good."""
    with contextlib.suppress(OSError):
        os.write(1, f"{line}\n".encode())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def main(argv: list[str]) -> int:
    """`jobdesk db keeper DATA_DIR BIN_DIR IDLE_STOP_S`: run detached until idle (hidden)."""
    if len(argv) != 3:
        print("jobdesk: error: db keeper takes DATA_DIR BIN_DIR IDLE_STOP_S", file=sys.stderr)
        return 2
    base, bin_dir, idle_stop_s = Path(argv[0]), Path(argv[1]), float(argv[2])
    # Fork once more and let the first process exit: the starter reaps it at once, and the keeper
    # is nobody's child, so a long-lived starter never holds it as a zombie.
    if os.fork() > 0:
        os._exit(0)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s %(levelname)-7s keeper[{os.getpid()}]: %(message)s")
    server = EmbeddedServer(base, bin_dir=bin_dir, idle_stop_s=idle_stop_s)
    os.chdir(server.root)  # keep no folder of the starter's busy
    keeper = Keeper(server, idle_stop_s)
    try:
        keeper.start()
    except JobdeskError as exc:
        log.error("%s", exc)
        _tell_starter(f"error: {exc}")
        return 1
    _tell_starter(f"ready {os.getpid()}")
    return asyncio.run(keeper.run())
