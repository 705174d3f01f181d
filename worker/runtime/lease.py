"""The worker's lease, kept from outside its event loop.

Other workers take a worker's jobs back once its heartbeat is older than JOB_LEASE_TIMEOUT. The
supervisor's heartbeat runs on the event loop, so a processor that blocks the loop (an `async
def` calling blocking code) would let the lease lapse while the job still runs, and another
worker would run it a second time. This thread renews the lease on a connection of its own (in
an event loop of its own), so the lease follows whether the process is alive, not whether its
loop is free. It lets the lease lapse only when the loop has been blocked for longer than the
time limit of the jobs the worker runs: then those jobs are taken back, as the limit says.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.runtime.watchdog import LoopWatch
from jobdesk.store import db, fleet

log = logging.getLogger("jobdesk.worker")

CONNECT_TIMEOUT_S = 10.0


class LeaseKeeper:
    """Renews `worker_id`'s lease every `interval` seconds from a thread. `allowance()` gives
    how long the loop may be blocked before the lease lapses (None: no limit)."""

    def __init__(self, dsn: str, worker_id: str, interval: float, watch: LoopWatch,
                 allowance: Callable[[], float | None]) -> None:
        self.dsn = dsn
        self.worker_id = worker_id
        self.interval = interval
        self.watch = watch
        self.allowance = allowance
        self.renewals = 0  # leases renewed by this thread
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lapsing = False  # said once per block that the lease is let go
        self._failing = False  # said once per outage that renewals fail

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._keep()), name="jobdesk-lease", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def should_renew(self) -> bool:
        blocked = self.watch.blocked_for()
        limit = self.allowance()
        if limit is not None and blocked > limit:
            if not self._lapsing:
                log.warning("the event loop has been blocked for %.1f s, longer than the time limit of the "
                            "jobs it runs (%.1f s): the lease is let go, and other workers take them back",
                            blocked, limit)
            self._lapsing = True
            return False
        self._lapsing = False
        return True

    async def _keep(self) -> None:
        conn: asyncpg.Connection | None = None
        try:
            # This loop runs nothing else, so waiting on the thread's event blocks no one.
            while not self._stop.wait(self.interval):
                if not self.should_renew():
                    continue
                try:
                    if conn is None:
                        conn = await db.connect(self.dsn, timeout=CONNECT_TIMEOUT_S)
                    async with asyncio.timeout(max(self.interval, 1.0)):
                        await fleet.renew_lease(conn, self.worker_id)
                    self.renewals += 1
                    self._failing = False
                except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError,
                        DatabaseUnavailable) as exc:
                    if not self._failing:
                        log.warning("could not renew this worker's lease from its lease thread: %s", exc)
                    self._failing = True
                    await _dropped(conn)
                    conn = None
        finally:
            await _dropped(conn)


async def _dropped(conn: asyncpg.Connection | None) -> None:
    if conn is not None:
        conn.terminate()
