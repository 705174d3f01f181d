"""What any process can learn about a running embedded server without being its keeper: the
keeper's state file (`keeper.json`, written here, read by `jobdesk db status` and `stop`), the
lock files that tell whether a keeper runs and which processes use the server, the server's
clients as `pg_stat_activity` lists them, and the `ServerStatus` that `jobdesk db status` reports.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from jobdesk.core.json_value import JsonObject

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)

KEEPER_APP = "jobdesk-embedded-keeper"  # application_name of the keeper's own connection
STATUS_APP = "jobdesk-db-status"  # and of `jobdesk db status`/`stop`, which are no clients either

# The server's clients: every client connection but the keeper's and our own.
CLIENTS_SQL = """
    SELECT pid, coalesce(application_name, '') AS application_name, coalesce(datname, '') AS database,
           backend_start
    FROM pg_stat_activity
    WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
      AND coalesce(application_name, '') <> ALL($1::text[])
    ORDER BY backend_start"""


@dataclass
class Client:
    """A connection to the embedded server, as its keeper last saw it."""

    pid: int
    application_name: str
    database: str
    since: str  # ISO 8601

    def to_json(self) -> JsonObject:
        return dict(self.__dict__)


async def fetch_clients(conn: asyncpg.Connection) -> list[Client]:
    """The server's clients, over `conn` (a connection to any of its databases)."""
    rows = await conn.fetch(CLIENTS_SQL, [KEEPER_APP, STATUS_APP], timeout=5)
    return [Client(pid=r["pid"], application_name=r["application_name"], database=r["database"],
                   since=r["backend_start"].isoformat() if r["backend_start"] else "") for r in rows]


class KeeperState(TypedDict, total=False):
    """The keeper's report in `keeper.json`, rewritten at every check; empty when no keeper runs."""

    keeper_pid: int
    postmaster_pid: int | None
    started_at: float
    idle_stop_s: float | None
    clients: list[JsonObject]
    last_active: float
    checked_at: float


def write_state(path: Path, state: KeeperState) -> None:
    """Replace the state file at once, so that readers never see half a file."""
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(state))
        tmp.replace(path)
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)


def read_state(path: Path) -> KeeperState:
    """The state file as last written, or {} when it is missing or unreadable."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    # Written by `write_state` alone, so a dict here has its keys.
    return cast(KeeperState, state) if isinstance(state, dict) else {}


def alive(pid: int) -> bool:
    """Whether a process runs; a zombie does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        # The state is the field after the parenthesised program name.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def lock_held(path: Path, *, exclusive: bool) -> bool:
    """Whether another process holds a lock on `path` that keeps us from taking ours (shared or
    exclusive, as asked); False when the file cannot be opened."""
    try:
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def shared_lock_pids(path: Path) -> list[int] | None:
    """The live pids holding a shared flock on `path`, from /proc/locks (Linux); None where unknown."""
    try:
        inode = path.stat().st_ino
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    pids = set()
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  READ 1234 08:01:5678 0 EOF"; a waiter's line has "->" first.
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[3] == "READ":
            with contextlib.suppress(ValueError, IndexError):
                if int(parts[5].split(":")[2]) == inode and alive(int(parts[4])):
                    pids.add(int(parts[4]))
    return sorted(pids)


@dataclass
class ServerStatus:
    """What `jobdesk db status` reports."""

    running: bool
    dsn: str
    root: Path
    keeper_pid: int | None = None
    idle_stop_s: float | None = None  # None: runs until stopped (`jobdesk db` in the foreground)
    clients: list[Client] | None = None  # None: unknown (it does not answer)
    last_active: float | None = None  # epoch seconds of the last client; None: no keeper
    processes: list[int] | None = None  # pids of the jobdesk processes that use it (Linux), None: unknown
    checked_at: float | None = None

    @property
    def idle_s(self) -> float | None:
        """Seconds without a client, or None when it does not run or cannot tell."""
        if not self.running or self.clients is None or self.last_active is None:
            return None
        if self.clients or self.processes:
            return 0.0
        return max(0.0, time.time() - self.last_active)

    def to_json(self) -> JsonObject:
        return {"running": self.running, "DATABASE_URL": self.dsn if self.running else None,
                "data_dir": str(self.root), "keeper_pid": self.keeper_pid,
                "clients": None if self.clients is None else [c.to_json() for c in self.clients],
                "processes": self.processes,
                "idle_s": None if self.idle_s is None else round(self.idle_s, 1),
                "idle_stop_s": self.idle_stop_s}

    @classmethod
    def of_running(cls, dsn: str, root: Path, state: KeeperState, clients: list[Client] | None,
                   processes: list[int] | None) -> ServerStatus:
        """A running server's status: its clients counted now, its idle time as its keeper (if
        any, from `state`) measures it."""
        if not state:
            return cls(True, dsn, root, clients=clients, processes=processes)
        return cls(True, dsn, root, keeper_pid=state.get("keeper_pid"), idle_stop_s=state.get("idle_stop_s"),
                   clients=clients, last_active=float(state.get("last_active") or 0),
                   checked_at=state.get("checked_at"), processes=processes)
