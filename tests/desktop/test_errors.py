"""The console's one error boundary: expected failures are messages, bugs reach one hook that
logs the traceback and shows a dialog."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

from jobdesk.console import errors
from jobdesk.console.tasks import spawn
from jobdesk.core.errors import DatabaseUnavailable
from tests.desktop.qt_helpers import run_qasync


def bug_dialogs() -> list[QMessageBox]:
    return [w for w in QApplication.topLevelWidgets()
            if isinstance(w, QMessageBox) and w.isVisible() and "went wrong" in w.text()]


def close_dialogs() -> None:
    for box in bug_dialogs():
        box.close()


async def boom() -> None:
    raise RuntimeError("the index is off by one")


async def unreachable() -> None:
    raise DatabaseUnavailable("cannot connect to PostgreSQL at jobs on db:5432: refused")


def test_a_bug_in_a_background_task_shows_a_dialog_and_logs_the_traceback(
        qapp: QApplication, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        spawn(boom(), "count-rows")
        await asyncio.sleep(0.1)

    with caplog.at_level(logging.ERROR, "jobdesk.console"):
        run_qasync(qapp, scenario())
    [box] = bug_dialogs()
    assert box.text().startswith("Something went wrong inside jobdesk (count-rows): RuntimeError: "
                                 "the index is off by one")
    assert "Traceback" in box.detailedText() and "in boom" in box.detailedText()
    assert "Traceback" in caplog.text and "the index is off by one" in caplog.text
    close_dialogs()


def test_an_expected_failure_is_a_log_line_not_a_dialog(qapp: QApplication,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        spawn(unreachable(), "status-counts")
        await asyncio.sleep(0.1)

    with caplog.at_level(logging.WARNING, "jobdesk.console"):
        run_qasync(qapp, scenario())
    assert bug_dialogs() == []
    assert "background task status-counts failed: cannot connect to PostgreSQL" in caplog.text
    assert "Traceback" not in caplog.text


def test_a_bug_in_a_qt_slot_reaches_the_same_hook(qapp: QApplication, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    errors.install()
    try:
        raise KeyError("selected_row")
    except KeyError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    [box] = bug_dialogs()
    assert "KeyError" in box.text() and "selected_row" in box.text()
    close_dialogs()


async def test_a_read_gives_its_value_none_included_or_refused_after_reporting_an_expected_failure() -> None:
    told: list[str] = []

    async def nothing() -> None:
        return None

    assert await errors.await_or_refuse(nothing(), lambda exc: told.append(str(exc))) is None  # a value, not a refusal
    assert await errors.await_or_refuse(unreachable(), lambda exc: told.append(errors.reason(exc))) is errors.REFUSED
    assert told == ["cannot connect to PostgreSQL at jobs on db:5432: refused"]
    with pytest.raises(RuntimeError, match="off by one"):  # a bug goes on to the error hook
        await errors.await_or_refuse(boom(), told.append)
    assert len(told) == 1
