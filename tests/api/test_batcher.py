"""The batcher behind group commit and group read: what arrives while a batch is at the database
goes in the next one, each caller gets its own result, and a failure reaches only its callers."""

from __future__ import annotations

import asyncio

import pytest

from jobdesk.api.batcher import Batcher


class Recorder:
    """A batch call that records each batch and holds it until released."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = asyncio.Event()
        self.running = 0
        self.most_running = 0

    async def __call__(self, items: list[int]) -> list[int | Exception]:
        self.batches.append(items)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        return [ValueError(f"odd {i}") if i % 2 else i * 10 for i in items]


async def test_a_lone_call_goes_at_once_and_later_ones_are_grouped() -> None:
    call = Recorder()
    batcher: Batcher[int, int] = Batcher(call, max_batch=3, max_in_flight=1)
    first = asyncio.ensure_future(batcher.submit(0))
    await asyncio.sleep(0.005)
    assert call.batches == [[0]]  # nothing waits for company
    rest = [asyncio.ensure_future(batcher.submit(i)) for i in range(2, 10, 2)]  # arrive while [0] runs
    await asyncio.sleep(0.01)
    assert call.batches == [[0]]
    call.release.set()
    assert await first == 0
    assert await asyncio.gather(*rest) == [20, 40, 60, 80]
    assert call.batches == [[0], [2, 4, 6], [8]]  # at most max_batch per batch, in arrival order
    assert call.most_running == 1


async def test_batches_in_flight_are_bounded() -> None:
    call = Recorder()
    batcher: Batcher[int, int] = Batcher(call, max_batch=2, max_in_flight=2)
    calls = [asyncio.ensure_future(batcher.submit(i * 2)) for i in range(9)]
    await asyncio.sleep(0.01)
    assert call.running == 2
    call.release.set()
    assert await asyncio.gather(*calls) == [i * 20 for i in range(9)]
    assert call.most_running == 2
    assert sorted(i for batch in call.batches for i in batch) == [i * 2 for i in range(9)]


async def test_a_result_that_is_an_exception_reaches_only_its_caller() -> None:
    call = Recorder()
    call.release.set()
    batcher: Batcher[int, int] = Batcher(call)
    answers = await asyncio.gather(*(batcher.submit(i) for i in range(4)), return_exceptions=True)
    assert answers[0] == 0 and answers[2] == 20
    assert [str(a) for a in answers[1::2]] == ["odd 1", "odd 3"]


async def test_a_failed_batch_fails_its_callers_and_the_next_batch_still_runs() -> None:
    seen: list[list[str]] = []

    async def call(items: list[str]) -> list[str | Exception]:
        seen.append(items)
        await asyncio.sleep(0.01)
        if "boom" in items:
            raise RuntimeError("the database went away")
        return [i.upper() for i in items]

    batcher: Batcher[str, str] = Batcher(call, max_in_flight=1)
    doomed = [asyncio.ensure_future(batcher.submit(i)) for i in ("boom",)]
    await asyncio.sleep(0.002)  # the first batch is at the database
    later = [asyncio.ensure_future(batcher.submit(i)) for i in ("a", "b")]
    for future in doomed:
        with pytest.raises(RuntimeError, match="went away"):
            await future
    assert await asyncio.gather(*later) == ["A", "B"]
    assert seen == [["boom"], ["a", "b"]]
