"""`jobdesk --smoke-test`: open the console, wait until its job table shows jobs, print one line, exit.

A check of an installation or a bundle that needs nobody at the screen: Qt and its plugins, the
icons, the database connection and the live job table all have to work for it to pass. It starts
no worker and changes nothing in the database.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable

from jobdesk.console.main_window import MainWindow
from jobdesk.console.theme import RESOURCES, icon
from jobdesk.core.errors import JobdeskError

CONNECT_TIMEOUT_S = 15.0
ROWS_TIMEOUT_S = 30.0


class SmokeTestFailed(JobdeskError):
    """The console did not get as far as showing jobs."""


async def smoke_test(window: MainWindow, *, connect_timeout: float = CONNECT_TIMEOUT_S,
                     rows_timeout: float = ROWS_TIMEOUT_S) -> int:
    """Check an open console window, then close it; return the exit code (0 passed, 1 failed)."""
    logging.getLogger().setLevel(logging.WARNING)
    try:
        line = await _check(window, connect_timeout, rows_timeout)
    except SmokeTestFailed as exc:
        print(f"jobdesk: error: smoke test: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        await window.connection.close()
        window.close()
    print(line, flush=True)
    return 0


async def _check(window: MainWindow, connect_timeout: float, rows_timeout: float) -> str:
    if icon("jobdesk").pixmap(32, 32).isNull():
        raise SmokeTestFailed(f"the console's icons do not load from {RESOURCES / 'icons'}")
    connection = window.connection
    reasons: list[str] = []
    connection.disconnected.connect(reasons.append)
    # The console would keep retrying; a check stops at the first failure.
    await _until(lambda: connection.is_connected or bool(reasons), connect_timeout)
    if reasons or not connection.is_connected:
        raise SmokeTestFailed(reasons[0] if reasons else
                              f"no connection to {connection.describe()} after {connect_timeout:g} s")
    shown = window.jobs.table.model()
    if not await _until(lambda: shown.rowCount() > 0, rows_timeout):
        raise SmokeTestFailed(f"connected to {connection.describe()}, but the job table shows no job "
                              f"after {rows_timeout:g} s")
    count = shown.rowCount()
    return f"smoke: connected to {connection.describe()}, {count} job{'' if count == 1 else 's'} shown"


async def _until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
