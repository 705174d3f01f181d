"""One log line per change of a database's reachability: when it goes away, and when it is back.

Every pool of a process shares one `Outage` per database (by its description), so a process with
several pools, or one that opens a new pool on each attempt (the console), still says each change
once. A database that was never reached is not reported here: the caller that could not connect
gets `DatabaseUnavailable` and says so itself.

asyncpg's pool logs a warning with a full traceback each time it fails to restore its minimum
size (every 1 to 60 s while the database is away); that record is dropped, since the pools say
the same in one line.
"""

from __future__ import annotations

import logging
import threading

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable

log = logging.getLogger("jobdesk.db")

_ASYNCPG_RETRY = "Failed to restore the pool connection floor"


class _DropPoolRetries(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_ASYNCPG_RETRY)


class Outage:
    """Whether one database is known to be away; `down` and `up` log only when that changes."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.reached = False  # connected at least once in this process
        self.is_down = False

    def down(self, reason: str) -> None:
        """A connection to it failed or was lost (logged once, and only once it had been reached)."""
        if self.is_down or not self.reached:
            return
        self.is_down = True
        log.warning("PostgreSQL at %s is unreachable (%s); reconnecting with backoff", self.where, reason)

    def up(self) -> None:
        """A connection to it was made."""
        self.reached = True
        if self.is_down:
            self.is_down = False
            log.warning("PostgreSQL at %s is reachable again", self.where)


class Unreachable(DatabaseUnavailable, ConnectionError):
    """A front door's pool could not connect: a `DatabaseUnavailable` for its callers, and a
    ConnectionError for code that tells a lost database by the connection errors."""


# What a failed connection attempt raises when the database (not the request) is the trouble.
UNREACHABLE: tuple[type[BaseException], ...] = (
    OSError, TimeoutError, asyncpg.InternalClientError, asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError, asyncpg.ConnectionFailureError)


_outages: dict[str, Outage] = {}
_lock = threading.Lock()


def outage(where: str) -> Outage:
    """The one `Outage` of the database described as `where`."""
    with _lock:
        found = _outages.get(where)
        if found is None:
            found = _outages[where] = Outage(where)
        return found


def reason(exc: BaseException) -> str:
    """An exception as one short line. asyncpg's own state errors on a connection that broke
    mid-query ("cannot switch to state 15") say it in words."""
    if type(exc).__name__ == "InternalClientError" and "cannot switch to state" in str(exc):
        return "the connection broke during a query"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


logging.getLogger("asyncpg.pool").addFilter(_DropPoolRetries())
