"""The console's one error boundary.

Expected failures (a `JobdeskError`, a database that is away or refused a query) become a
message where they happen. Anything else is a bug: it reaches one hook, which logs the traceback
and shows a dialog, whether it was raised in a Qt slot (`sys.excepthook`) or in a background
task (the loop's exception handler, and `jobdesk.console.tasks.spawn`)."""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
import traceback
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Literal, TypeVar

from jobdesk.core.errors import JobdeskError
from jobdesk.store.db import EXPECTED_DB_ERRORS

log = logging.getLogger("jobdesk.console")

EXPECTED: tuple[type[BaseException], ...] = (JobdeskError, *EXPECTED_DB_ERRORS)

_shown: list[Any] = []  # the open bug dialogs, so they are not garbage-collected

T = TypeVar("T")


def reason(exc: BaseException) -> str:
    """An expected failure as one line for the user."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Refused(enum.Enum):
    """What `await_or_refuse` gives for work that failed as expected (its own None is a value)."""

    REFUSED = "refused"


REFUSED = Refused.REFUSED


async def await_or_refuse(work: Awaitable[T], refused: Callable[[BaseException], None]) -> T | Literal[Refused.REFUSED]:
    """Await `work` (a read or an action) and give what it gives. An expected failure goes to
    `refused`, which shows it where the work was asked for, and gives REFUSED; a bug goes on to
    the error hook, and a cancellation (a newer load taking over) ends the caller as well."""
    try:
        return await work
    except EXPECTED as exc:
        refused(exc)
        return REFUSED


async def attempt(work: Awaitable[T], busy: Callable[[bool], None],
                  refused: Callable[[BaseException], None]) -> T | None:
    """Await `work` (an action whose result is never None) between `busy(True)` and
    `busy(False)`, however it ends. An expected failure goes to `refused`, which shows it where
    the action was asked for, and gives None; a bug goes on to the error hook."""
    busy(True)
    try:
        done = await await_or_refuse(work, refused)
    finally:
        busy(False)
    return None if done is REFUSED else done


def report_bug(exc: BaseException, where: str = "") -> None:
    """Log an unexpected exception with its traceback and show it in a dialog."""
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    log.error("bug%s: %s", f" in {where}" if where else "", trace.rstrip())
    from PySide6.QtWidgets import QApplication, QMessageBox

    if QApplication.instance() is None:
        return
    box = QMessageBox(QMessageBox.Icon.Critical, "jobdesk",
                      f"Something went wrong inside jobdesk{f' ({where})' if where else ''}: "
                      f"{type(exc).__name__}: {reason(exc)}\n\nThe console goes on; the details are in its log.",
                      QMessageBox.StandardButton.Ok)
    box.setDetailedText(trace)
    box.setModal(False)
    box.finished.connect(lambda _result: _shown.remove(box) if box in _shown else None)
    _shown.append(box)
    box.show()


def _excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    report_bug(exc.with_traceback(tb))


def _loop_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    if isinstance(exc, BaseException) and not isinstance(exc, asyncio.CancelledError):
        report_bug(exc, context.get("message", ""))
    else:
        loop.default_exception_handler(context)


def install(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Route every unexpected exception to `report_bug`."""
    sys.excepthook = _excepthook
    if loop is not None:
        loop.set_exception_handler(_loop_handler)
