"""Pause type and Resume type in the console, against a real PostgreSQL with two real workers,
offscreen: on the selected job's type (toolbar and the job table's context menu) and in the
Limits view; the detail pane's waiting reason follows live; limits edited in the Limits view,
which shows each limit in force and where it came from; bad input is one message, nothing written."""

from __future__ import annotations

import asyncio
import getpass
import json

import asyncpg
import pytest
from PySide6.QtWidgets import QApplication

from jobdesk.console.workers import workers_panel
from jobdesk.console.workers.type_limits_view import LimitsDialog
from jobdesk.processors.builtin import EchoProcessor
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_workers_panel import close, open_window, test_db  # noqa: F401 - the fixture
from tests.flow_processors import Nap
from tests.helpers import RunningWorker, wait_for

# Within a poll interval (0.05 s here), with a wide margin for a loaded machine.
SETTLE_S = 2.0


@pytest.fixture(autouse=True)
def quick_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The panel reads the limits and types at each poll."""
    monkeypatch.setattr(workers_panel, "UNSERVED_EVERY_S", 0.0)
    monkeypatch.setattr(workers_panel, "POLL_MS", 300)


def two_workers(dsn: str) -> list[RunningWorker]:
    return [RunningWorker(dsn, {"echo": EchoProcessor(), "nap": Nap()}, MAX_CONCURRENT_JOBS=4) for _ in range(2)]


async def enqueue(conn: asyncpg.Connection, job_type: str, n: int, **input_data: object) -> list[str]:
    rows = await conn.fetch("INSERT INTO jobs (type, input_data) SELECT $1, $2::jsonb FROM generate_series(1, $3) "
                            "RETURNING id", job_type, json.dumps(input_data), n)
    return [r["id"] for r in rows]


def test_pause_and_resume_a_type_from_the_console(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        workers = two_workers(test_db)
        window = open_window(qtbot, test_db)
        [first] = await enqueue(conn, "echo", 1)
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", first),
                       what="the first echo job")
        await until(lambda: window.jobs.select_job(first), what="the job in the table")
        actions = window.job_actions
        await until(lambda: actions.actions["pause_type"].isEnabled(), what="Pause type to be enabled")
        menu = [a.text() for a in window.share.job_menu([first]).actions()]
        assert "Pause type…" in menu and "Resume type" in menu
        assert window.jobs.table.contextMenuPolicy().name == "CustomContextMenu"

        assert await actions.perform_type("pause_type", "echo", "upstream outage")
        await asyncio.sleep(SETTLE_S)  # both workers have read the pause
        held = await enqueue(conn, "echo", 10)
        naps = await enqueue(conn, "nap", 10)
        await wait_for(lambda: conn.fetchval("SELECT bool_and(status = 'completed') FROM jobs WHERE id = ANY($1)",
                                             naps), what="the other type to go on")
        await asyncio.sleep(0.5)
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'queued'", held) == 10

        # The detail pane says why, and follows a resume live.
        window.select_job(held[0])
        waiting = window.detail.meta_labels["Waiting"]
        await until(lambda: f"type paused by {getpass.getuser()} at " in waiting.text(), what="the paused reason")

        panel = window.workers.panel
        await until(lambda: panel.types.select_type("echo"), what="the type in the Limits view")
        await until(lambda: any(r[0] == "echo" and r[1].startswith("paused by") for r in panel.types.rows()),
                    what="paused in the Limits view")
        assert await panel.types.perform("resume_type", "echo")
        await wait_for(lambda: conn.fetchval("SELECT bool_and(status = 'completed') FROM jobs WHERE id = ANY($1)",
                                             held), what="claims to start again")
        await until(lambda: "paused" not in waiting.text(), what="the pane to drop the paused reason")
        audit = await conn.fetch("SELECT action, reason, source FROM audit_log WHERE job_type = 'echo' ORDER BY id")
        assert [(r["action"], r["reason"], r["source"]) for r in audit] == [
            ("pause-type", "upstream outage", "console"), ("resume-type", None, "console")]
        for w in workers:
            await w.stop()
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_limits_edited_in_the_limits_view(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        worker = RunningWorker(test_db, {"nap": Nap(), "echo": EchoProcessor()}, MAX_CONCURRENT_JOBS=6,
                               JOB_RATE_LIMITS="nap=100/s")
        window = open_window(qtbot, test_db)
        view = window.workers.panel.types
        await until(lambda: view.select_type("nap"), what="the type in the Limits view")
        await until(lambda: [r for r in view.rows() if r[0] == "nap"][0][3] == "100/s · env JOB_RATE_LIMITS",
                    what="the setting's rate and its source")
        # The types neither paused nor limited are shown with All types.
        assert "echo" not in [r[0] for r in view.rows()]
        view.all_types.setChecked(True)
        assert [r[0] for r in view.rows()] == ["nap", "echo"]
        assert view.rows()[1][1:6] == ("active", "—", "—", "—", "—")

        # Bad input: one message, and nothing written.
        record = next(r for r in view.records if r.type == "nap")
        dialog = LimitsDialog(record, view)
        dialog.edits["limit"].setText("-1")
        dialog.accept()
        assert dialog.error.isVisibleTo(dialog) and "below 0" in dialog.error.text()
        assert dialog.result() != LimitsDialog.DialogCode.Accepted
        assert not await view.set_limits("nap", {"rate": "fast"})
        assert view.error_label.isVisibleTo(view) and "not a rate" in view.error_label.text()
        assert not await view.set_limits("x" * 256, {"limit": 1})
        assert "at most 255" in view.error_label.text()
        assert await conn.fetchval("SELECT count(*) FROM type_controls") == 0

        # A limit set here: in force at once, shown with who set it; a running worker obeys it.
        await enqueue(conn, "nap", 40, seconds=0.3)
        assert await view.set_limits("nap", {"limit": "1", "rate": None})
        await until(lambda: [r for r in view.rows() if r[0] == "nap"][0][2] == f"1 · database (set by "
                    f"{getpass.getuser()})", what="the limit and who set it")
        await asyncio.sleep(SETTLE_S)
        most = 0
        for _ in range(30):
            most = max(most, await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'nap' "
                                                 "AND status = 'in_progress'"))
            await asyncio.sleep(0.05)
        assert most == 1
        await worker.stop()
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())
