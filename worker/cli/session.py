"""What a command runs with: its arguments, the settings, and the database, chosen once per
process when a command first needs it (so that a usage error never starts the embedded server);
and the service a command opens for its work and closes after it."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any

from jobdesk.store.db import Database

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings
    from jobdesk.service.jobs import JobService

CLI_POOL_SIZE = 2  # a command runs its statements one after another


class Invocation:
    """One run of a `jobdesk` command."""

    def __init__(self, args: argparse.Namespace, settings: Settings) -> None:
        self.args = args
        self.settings = settings

    @cached_property
    def database(self) -> Database:
        """DATABASE_URL, or the embedded default (started now if nobody runs it yet)."""
        return Database.resolve(self.settings)

    @asynccontextmanager
    async def service(self) -> AsyncIterator[JobService]:
        """The service on this database (its schema checked, the embedded one migrated), closed
        when the block ends: a command acts inside the block and prints after it."""
        from jobdesk.service.jobs import JobService  # the commands that read or act on jobs load it

        client = await JobService.connect(self.database, settings=self.settings, source="cli",
                                          pool_size=CLI_POOL_SIZE)
        try:
            yield client
        finally:
            await client.close()


# A command runs with its invocation and gives the exit code: at once, or as a coroutine run by main.
Command = Callable[[Invocation], int | Coroutine[Any, Any, int]]
