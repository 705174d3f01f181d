"""Whether a live worker serves a job type, for the warning an enqueue of a type nobody serves
gets (a typo, or a worker started without the processor): the job is enqueued all the same, and
waits until a worker that serves it starts.

What the live workers serve is read at most once every SERVED_TTL_S per service (its views
share it), so that an enqueue adds no statement of its own: between two reads, the check is a
look-up in a set. A worker started or stopped within that time is seen at the next read."""

from __future__ import annotations

import asyncio
import difflib
import logging
import time
from collections.abc import Iterable

import asyncpg

from jobdesk.store.db import EXPECTED_DB_ERRORS
from jobdesk.store.fleet import live_served_types

log = logging.getLogger(__name__)

SERVED_TTL_S = 5.0


def unserved_warning(job_type: str, served: Iterable[str]) -> str:
    """The warning for `job_type`, which no live worker serves, with the served type nearest to it."""
    near = difflib.get_close_matches(job_type, sorted(served), n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return f"no live worker serves {job_type}{hint}; its jobs wait until a worker that serves it starts"


class ServedTypes:
    """What the live workers serve, as last read; and the types a client has warned of."""

    def __init__(self) -> None:
        self._served: frozenset[str] = frozenset()
        self._any_live = False
        self._read_at = -SERVED_TTL_S
        self._lock: asyncio.Lock | None = None
        self.warned: set[str] = set()  # the types `JobClient` has logged its warning for

    async def warnings(self, pool: asyncpg.Pool, lease_timeout_s: float,
                       job_types: Iterable[str]) -> dict[str, str]:
        """The warning of each type of `job_types` that no live worker serves, while some live worker
        serves other types (with none at all, workers are simply not started yet). Nothing when
        the workers cannot be read: the enqueue has happened, and a warning is not worth an error."""
        if time.monotonic() - self._read_at > SERVED_TTL_S:
            await self._read(pool, lease_timeout_s)
        if not self._any_live:
            return {}
        return {t: unserved_warning(t, self._served) for t in job_types if t not in self._served}

    async def _read(self, pool: asyncpg.Pool, lease_timeout_s: float) -> None:
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:  # concurrent enqueues share one read
            if time.monotonic() - self._read_at <= SERVED_TTL_S:
                return
            try:
                workers: list[frozenset[str]] | None = await _read_workers(pool, lease_timeout_s)
            except EXPECTED_DB_ERRORS as exc:
                log.debug("cannot read which types the live workers serve: %s", exc)
                workers = None
            self._read_at = time.monotonic()
            if workers is not None:
                self._any_live = bool(workers)
                self._served = frozenset().union(*workers)


async def _read_workers(pool: asyncpg.Pool, lease_timeout_s: float) -> list[frozenset[str]]:
    async with pool.acquire() as conn:
        return await live_served_types(conn, lease_timeout_s)
