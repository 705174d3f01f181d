"""Running console code on a qasync loop inside a (synchronous) pytest-qt test."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import qasync
from PySide6.QtCore import QCoreApplication, QThread
from PySide6.QtWidgets import QApplication

T = TypeVar("T")


_loop: qasync.QEventLoop | None = None


def run_qasync(app: QApplication, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Run `coro` to completion on the qasync loop that drives the Qt event loop.

    One loop serves every console test: Qt keeps references to a loop's timers and socket
    notifiers, and a second loop on the same QApplication crashes once the first is gone.
    """
    global _loop
    app.setQuitOnLastWindowClosed(False)  # closing a test window must not stop the loop
    if _loop is None:
        _loop = qasync.QEventLoop(app)
    previous = None
    try:
        previous = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        pass
    asyncio.set_event_loop(_loop)
    try:
        return _loop.run_until_complete(asyncio.wait_for(coro, timeout))
    finally:
        # Finish what the console left running, so nothing fires into a deleted window.
        pending = [t for t in asyncio.all_tasks(_loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            _loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        asyncio.set_event_loop(previous)


def close_loop() -> None:
    """Close the shared loop at the end of the run. That ends the threads of its default executor
    (qasync's QThreadExecutor, started by the first `run_in_executor`, such as a worker's stop of its
    lease thread): left running, Qt says `QThread: Destroyed while thread '' is still running` as the
    process exits."""
    global _loop
    if _loop is not None:
        _loop.close()
        _loop = None


def running_qthreads() -> list[QThread]:
    """The QThreads made from Python that still run (the application's own thread aside)."""
    app = QCoreApplication.instance()
    main = app.thread() if app is not None else None
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, QThread) and obj is not main:
            try:
                if obj.isRunning():
                    found.append(obj)
            except RuntimeError:  # its Qt object is already deleted
                continue
    return found


async def until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Wait, letting the loop run, until predicate() is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)
