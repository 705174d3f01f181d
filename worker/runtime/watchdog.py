"""The worker's watch on its own event loop: a timer on the loop notes the time every 50 ms,
and a thread looks at it. A note late by more than 100 ms means something blocked the loop;
the thread asks, while it is blocked, which job's task is on the loop (the same one each time
it looks, or the loop was only busy), and logs one warning per job type that names its
processor and the time it blocked, once, not once per job.

How long the loop has been blocked is also what the lease keeper (`runtime.lease`) reads.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("jobdesk.worker")

TICK_S = 0.05  # how often the loop notes the time
BLOCKED_S = 0.1  # a loop late by more than this was blocked
REPORT_AFTER_S = 2.0  # a loop blocked this long is reported before it is free again
# A loop late while no job's processor was on it is reported past this: a shorter delay is most
# often the machine being busy (the loop's thread waiting for a CPU), not code that blocks.
UNNAMED_BLOCK_S = 1.0


class LoopWatch:
    """Watches one event loop from a thread. `blame()`, called from that thread while the loop
    is blocked, names the job type that blocks it (None if no job's task is on the loop)."""

    def __init__(self, blame: Callable[[], str | None]) -> None:
        self.blame = blame
        self.beat = time.monotonic()
        self.warned: set[str | None] = set()
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._tick()
        self._thread = threading.Thread(target=self._watch, name="jobdesk-loop-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()

    def blocked_for(self) -> float:
        """Seconds the loop is late now (0 when it is free)."""
        return max(0.0, time.monotonic() - self.beat - TICK_S)

    def _tick(self) -> None:
        self.beat = time.monotonic()
        if not self._stop.is_set() and self._loop is not None:
            self._handle = self._loop.call_later(TICK_S, self._tick)

    def _watch(self) -> None:
        blocked_since: float | None = None  # the last note before the loop blocked
        culprit: str | None = None
        reported = False
        while not self._stop.wait(TICK_S / 2):
            beat = self.beat
            if time.monotonic() - beat - TICK_S > BLOCKED_S:
                seen = self.blame()
                if blocked_since != beat:  # a new block
                    blocked_since, culprit, reported = beat, seen, False
                elif seen != culprit:
                    # Another task is on the loop now: it was busy, not blocked by one job.
                    culprit = None
                late = time.monotonic() - beat - TICK_S
                if late > REPORT_AFTER_S and not reported:
                    self._report(culprit, late, so_far=True)
                    reported = True
            elif blocked_since is not None:
                if not reported and beat > blocked_since:
                    self._report(culprit, beat - blocked_since - TICK_S, so_far=False)
                blocked_since, culprit = None, None

    def _report(self, culprit: str | None, seconds: float, *, so_far: bool) -> None:
        if culprit in self.warned or (culprit is None and seconds < UNNAMED_BLOCK_S):
            return
        self.warned.add(culprit)
        span = f"{seconds:.1f} s so far" if so_far else f"{seconds:.1f} s"
        if culprit is None:
            log.warning("the event loop was blocked for %s, by no job's processor", span)
        else:
            log.warning("processor %s blocked the event loop for %s; make it a SyncProcessor (a plain def) "
                        "to run it in a thread", culprit, span)
