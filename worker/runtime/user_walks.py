"""The index of runnable jobs by user, built in the background once a worker serves a type
whose claims walk users (`jobdesk.store.user_index`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg

from jobdesk.core.errors import JobdeskError
from jobdesk.store import user_index

log = logging.getLogger("jobdesk.worker")


class UserIndexKeeper:
    """Starts the build at most once at a time, and not again once it is there."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.ready = False
        self._task: asyncio.Task[None] | None = None

    def ensure_soon(self) -> None:
        """Build the index in the background unless it is there or being built."""
        if self.ready or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.create_task(self._ensure(), name="jobdesk-user-index")

    async def _ensure(self) -> None:
        try:
            if await user_index.ensure(self.dsn):
                log.info("built %s, which the claims of types with fair share or per-user limits read",
                         user_index.INDEX)
            self.ready = True
        except (asyncpg.PostgresError, OSError, JobdeskError) as exc:
            log.warning("could not build %s (%s); claims that walk users read the jobs without it until the "
                        "next change of limits tries again", user_index.INDEX, str(exc).strip().splitlines()[0])

    async def close(self) -> None:
        """Stop a build in flight (a later worker makes it again)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
