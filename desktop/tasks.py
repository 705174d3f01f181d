"""Background tasks started from Qt slots: named, referenced, and their errors logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("jobdesk.console")

_running: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any] | None:
    """Schedule `coro` on the running loop; after the loop has stopped (the window is closing),
    drop it quietly instead of raising inside a Qt slot."""
    loop: asyncio.AbstractEventLoop | None
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            loop = None
    if loop is None or loop.is_closed() or not loop.is_running():
        coro.close()
        return None
    task = loop.create_task(coro, name=name)
    _running.add(task)
    task.add_done_callback(_finished)
    return task


def _finished(task: asyncio.Task[Any]) -> None:
    _running.discard(task)
    if task.cancelled() or task.exception() is None:
        return
    exc = task.exception()
    assert exc is not None
    from jobdesk.console.errors import EXPECTED, reason, report_bug

    if isinstance(exc, EXPECTED):
        log.warning("background task %s failed: %s", task.get_name(), reason(exc))
    else:
        report_bug(exc, task.get_name())
