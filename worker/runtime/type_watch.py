"""What a worker knows of the controls an operator set on its types at run time: which are paused
across the fleet, and whether their limits changed (`jobdesk types pause|resume|set`).

The claim is the hot path, so it never reads `type_controls`: this loop reads the paused types
(one small statement) on the control NOTIFY, hands them to the pumps, which leave them out of
their claims, and reads the limits again when the table's stamp moved. While the worker hears
no NOTIFY (behind a transaction pooler, or while its listener is away) it reads every poll
interval instead, which keeps it within one poll interval of a change; when its listener is back
it reads once, for what was said while it was away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from jobdesk.runtime.dblink import DbLink
from jobdesk.runtime.pump import Pumps
from jobdesk.store import type_controls
from jobdesk.store.db import CONNECTION_ERRORS

log = logging.getLogger("jobdesk.worker")


class TypeWatch:
    """Keeps `pumps.paused_types` and the pumps' limits in step with `type_controls`."""

    def __init__(self, db: DbLink, pumps: Pumps, refresh_limits: Callable[[], Awaitable[None]], *,
                 poll: float, stop: asyncio.Event, listening: Callable[[], bool]) -> None:
        """`listening()`: whether the worker hears the control channel's NOTIFY now."""
        self.db = db
        self.pumps = pumps
        self.refresh_limits = refresh_limits
        self.poll = poll
        self.stop = stop
        self.listening = listening
        self._changed = asyncio.Event()  # a NOTIFY said the controls changed
        self._stamp: datetime | None = None

    def changed(self) -> None:
        """The control channel announced a change, or the listener is back: read it now."""
        self._changed.set()

    async def read(self) -> None:
        """Read the paused types, and the limits again if an operator changed any since."""
        controls = await self.db.call(lambda c: type_controls.claim_controls(c, self.pumps.types))
        if controls.paused != self.pumps.paused_types:
            if controls.paused:
                log.info("paused types: %s", ", ".join(sorted(controls.paused)))
            self.pumps.set_paused_types(controls.paused)
        if controls.stamp != self._stamp:
            self._stamp = controls.stamp
            await self.refresh_limits()

    async def run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll):
                    await self._changed.wait()
            if not self._changed.is_set() and self.listening():
                continue  # nothing said, and a change would have been: the NOTIFY wakes this loop
            self._changed.clear()
            try:
                await self.read()
            except CONNECTION_ERRORS:
                pass  # the database is away: db.call says so once; the next poll tries again
