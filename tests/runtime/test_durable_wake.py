"""A short sleep's local wake-up works on any event loop: qasync's (the console runs a worker for
the showcase and `make run`) returns a plain Handle from call_later, with no when()."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from jobdesk.runtime.durable import Durability


class PlainHandle(asyncio.Handle):
    """A timer's handle without when(): cancelling it cancels the timer."""

    def __init__(self, timer: asyncio.TimerHandle, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(lambda: None, (), loop)
        self._timer = timer

    def cancel(self) -> None:
        self._timer.cancel()
        super().cancel()


class PlainHandleLoop(asyncio.SelectorEventLoop):
    """A loop whose call_later returns a plain asyncio.Handle, as qasync's does."""

    def call_later(self, delay: float, callback: Any, *args: Any, context: Any = None) -> asyncio.Handle:
        return PlainHandle(super().call_later(delay, callback, *args, context=context), self)


def test_wakes_on_a_loop_whose_timers_have_no_when() -> None:
    woken: list[float] = []
    loop = PlainHandleLoop()
    try:
        durability = Durability(None, "w", None, lambda: woken.append(loop.time()))  # type: ignore[arg-type]

        async def scenario() -> None:
            start = loop.time()
            durability.wake_at(datetime.now(UTC) + timedelta(seconds=0.05))
            durability.wake_at(datetime.now(UTC) + timedelta(seconds=0.1))
            await asyncio.sleep(0.5)
            assert len(woken) == 2, woken
            assert all(at - start >= 0.04 for at in woken), woken
            assert not durability._timers, "fired wake-ups are forgotten"
            durability.wake_at(datetime.now(UTC) + timedelta(seconds=0.2))
            durability.close()
            await asyncio.sleep(0.4)
            assert len(woken) == 2, "a closed Durability wakes no one"

        loop.run_until_complete(scenario())
    finally:
        loop.close()
