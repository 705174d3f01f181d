"""A service's read replica (DATABASE_READ_URL): its pool, where each read goes, and its lag.

Reads go to the replica. Writes, LISTEN and the reads a write decides on go to the primary, as
without a replica. Read-your-writes is a fence: `fence()` takes the primary's WAL position (every
write committed so far lies before it) and waits a little for the replica to replay past it;
until the replica has, reads go to the primary. The console fences after each of its actions and
before each refresh a notification asked for, so that it never shows a job older than it knows
it is. The HTTP API does not fence (one service serves every caller): its GETs read the replica,
and one that finds no job there asks the primary before answering 404.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import asyncpg

from jobdesk.store import read_replica
from jobdesk.store.db import describe

# While a fence waits for the replica, it asks this often whether the replica has caught up.
FENCE_POLL_S = 0.02


@dataclass(frozen=True)
class ReplicaLag:
    """How far a read replica is behind the primary."""

    where: str  # the replica, in words
    seconds: float  # 0 when it has replayed everything the primary had written when asked
    standby: bool  # False: the read URL points at a server not in recovery (no lag to have)

    def describe(self) -> str:
        return f"replica {self.seconds:.1f} s behind"


class ReadReplica:
    """The pool of a read replica and the fence of the service (and views) that read through it."""

    def __init__(self, pool: asyncpg.Pool, dsn: str) -> None:
        self.pool = pool
        self.dsn = dsn
        self._fence: str | None = None  # a primary WAL position the replica must pass to be read
        self._caught_up_at: float | None = None  # monotonic time `lag` last found it caught up
        self._behind_since: float | None = None  # monotonic time `lag` first found it behind, since then

    def describe(self) -> str:
        return describe(self.dsn)

    @property
    def fenced(self) -> bool:
        """Reads go to the primary until the replica has replayed past the fence."""
        return self._fence is not None

    async def choose(self, primary: asyncpg.Pool) -> asyncpg.Pool:
        """The pool a read goes to: this replica, or the primary while a fence holds (one short
        statement on the replica finds out whether it still does)."""
        fence = self._fence
        return self.pool if fence is None or await self._passed(fence) else primary

    async def fence(self, primary: asyncpg.Pool, *, wait: float = 0.0) -> bool:
        """Fence at the primary's WAL position now, and wait up to `wait` seconds for the replica
        to replay past it. True when it has (and the fence is gone): reads see every write
        committed before the call, on the replica. False: reads go to the primary until then."""
        lsn = await read_replica.wal_position(primary)
        self._fence = lsn  # positions only grow: the newest fence covers the older ones
        deadline = time.monotonic() + wait
        while True:
            if await self._passed(lsn):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(FENCE_POLL_S)

    async def _passed(self, lsn: str) -> bool:
        """Whether the replica has replayed past `lsn`; if so, a fence at `lsn` is lifted (a newer
        fence set meanwhile stays)."""
        if not await read_replica.replayed_past(self.pool, lsn):
            return False
        if self._fence == lsn:
            self._fence = None
        return True

    async def lag(self, primary: asyncpg.Pool) -> ReplicaLag:
        """How far behind the replica is: 0 once it has replayed everything the primary had
        written when asked. Otherwise the time since the last transaction it replayed committed,
        capped at the time since it was last found caught up (on a primary idle for an hour, a
        single new write must not read as an hour behind)."""
        lsn = await read_replica.wal_position(primary)
        state = await read_replica.replay_state(self.pool, lsn)
        now = time.monotonic()
        if state.caught_up:
            self._caught_up_at, self._behind_since = now, None
            return ReplicaLag(self.describe(), 0.0, state.standby)
        if self._behind_since is None:
            self._behind_since = now
        # Nothing replayed since the replica started: at least as long as it has been seen behind.
        behind = state.since_replayed_s if state.since_replayed_s is not None else now - self._behind_since
        if self._caught_up_at is not None:
            behind = min(behind, now - self._caught_up_at)
        return ReplicaLag(self.describe(), behind, state.standby)
