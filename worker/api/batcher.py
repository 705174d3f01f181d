"""Grouped calls: the concurrent calls of one batch operation reach the database together.

`POST /api/jobs` enqueues through one (group commit: one statement and one commit for the jobs of
many requests), and `GET /api/jobs/{id}` reads through another (group read: one round trip for
the documents of many polls). A batch takes whatever arrived while the previous one was in
flight, so a lone request waits for nothing, and under load the cost per request falls with the
batch size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

MAX_BATCH = 500
MAX_IN_FLIGHT = 2  # batches at the database at once: one filling while the other runs

Item = TypeVar("Item")
Result = TypeVar("Result")

# Runs one batch: a result per item, in order. An exception in the list is raised to that item's
# caller alone; an exception raised by the call itself goes to every caller of the batch.
BatchCall = Callable[[list[Item]], Awaitable[Sequence[Result | Exception]]]


class Batcher(Generic[Item, Result]):
    def __init__(self, call: BatchCall[Item, Result], *, max_batch: int = MAX_BATCH,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self._call = call
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._in_flight < self._max_in_flight:
            self._in_flight += 1
            task = asyncio.create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = self._pending[:self._max_batch]
                self._pending = self._pending[self._max_batch:]
                try:
                    results = await self._call([item for item, _ in batch])
                except BaseException as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, future), result in zip(batch, results):
                    if future.done():
                        continue
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._in_flight -= 1
