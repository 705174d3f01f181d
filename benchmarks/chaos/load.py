"""The producer: jobs enqueued through `JobClient.enqueue_many` at a fixed rate (a small batch
every 20 ms, as many as the schedule says are due), whatever happens to the database. A batch
whose commit is confirmed adds its ids to `confirmed`; one that raises DatabaseUnavailable is
counted in `unconfirmed` and not retried (its jobs may or may not exist)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from jobdesk import DatabaseUnavailable, JobClient
from jobdesk.core.models import JobCreate

TICK_S = 0.02
MAX_BATCH_S = 0.5  # after a stall, at most half a second's worth in one batch
MAX_BACKLOG_S = 1.0  # and at most a second's worth is caught up: a stalled caller gives up

log = logging.getLogger("chaos.producer")


@dataclass
class Producer:
    client: JobClient
    rate: float  # jobs per second; may be changed while running
    ms: float  # how long each job sleeps
    confirmed: list[str] = field(default_factory=list)
    unconfirmed: int = 0
    errors: int = 0
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        due = 0.0
        last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            due = min(due + self.rate * (now - last), self.rate * MAX_BACKLOG_S)
            last = now
            n = min(int(due), max(1, int(self.rate * MAX_BATCH_S)))
            if n > 0:
                due -= n
                await self._send(n)
            await asyncio.sleep(max(0.0, TICK_S - (time.monotonic() - now)))

    async def _send(self, n: int) -> None:
        jobs = [JobCreate(type="chaos.sleep", input_data={"ms": self.ms}) for _ in range(n)]
        try:
            self.confirmed.extend(await self.client.enqueue_many(jobs))
        except DatabaseUnavailable:
            self.unconfirmed += n
            await asyncio.sleep(0.1)  # the client's pool reconnects; try the next batch soon
        except Exception as exc:  # noqa: BLE001 - counted and logged: the producer must go on
            self.errors += n
            log.warning("enqueue failed: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(0.1)
