"""The approval inbox, the New job dialog and the empty table's hint, offscreen on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QInputDialog

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from jobdesk.core.settings import load_settings
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def open_window(qtbot, dsn: str, **settings: object) -> MainWindow:  # type: ignore[no-untyped-def]
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn, **settings), embedded=False)
    window = MainWindow(connection)
    qtbot.addWidget(window)
    window.show()
    connection.start()
    return window


def inbox_ids(window: MainWindow) -> list[str]:
    model = window.approvals.model
    return [model.row_at(i).id for i in range(model.rowCount())]  # type: ignore[union-attr]


def current_inbox_id(window: MainWindow) -> str | None:
    rows = window.approvals.selected_rows()
    return rows[0].id if rows else None


def test_approval_inbox(qapp: QApplication, qtbot, qtmodeltester, test_db: str,  # type: ignore[no-untyped-def]
                        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        for i, name in enumerate(["a-1", "a-2", "a-3"]):
            await conn.execute("INSERT INTO jobs (id, type, input_data, status, result_data, created_at) "
                               "VALUES ($1, 'invoice.check', '{}', 'waiting_approval', $2, now() - $3::text::interval)",
                               name, json.dumps({"total": 100 + i, "lines": [i]}), f"{10 - i} minutes")
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('q-1', 'echo', '{}')")
        window = open_window(qtbot, test_db)
        index = window.tabs.indexOf(window.approvals)
        # The count is on the tab's title, live, even before the tab is shown.
        await until(lambda: window.tabs.tabText(index) == "Approvals (3)", what="the count on the tab")
        window.tabs.setCurrentWidget(window.approvals)
        await until(lambda: inbox_ids(window) == ["a-1", "a-2", "a-3"], what="the inbox, oldest first")
        qtmodeltester.check(window.approvals.model)
        # The first job is current; its result is beside the list, and the toolbar acts on it.
        await until(lambda: current_inbox_id(window) == "a-1", what="the first job selected")
        await until(lambda: '"total": 100' in window.approvals.result_view.raw.toPlainText(), what="the result")
        assert window.job_actions.actions["approve"].isEnabled()

        # Ctrl+Return approves the inbox's current job, and the view moves to the next one.
        window.activateWindow()
        await until(lambda: window.isActiveWindow(), what="an active window")
        qtbot.keyClick(window.approvals.table, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        await until(lambda: current_inbox_id(window) == "a-2", what="the next job after approving")
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'a-1'") == "completed"
        await until(lambda: window.tabs.tabText(index) == "Approvals (2)", what="the count after approving")
        await until(lambda: '"total": 101' in window.approvals.result_view.raw.toPlainText(), what="its result")

        # Ctrl+Shift+J rejects with a reason.
        monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("totals do not add up", True))
        qtbot.keyClick(window.approvals.table, Qt.Key.Key_J,
                       Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        await until(lambda: current_inbox_id(window) == "a-3", what="the next job after rejecting")
        qtbot.keyClick(window.approvals.table, Qt.Key.Key_Escape)  # QTest keeps the last modifiers held
        row = await conn.fetchrow("SELECT status, error_message FROM jobs WHERE id = 'a-2'")
        assert (row["status"], row["error_message"]) == ("failed", "rejected: totals do not add up")

        # A job that starts waiting shows up live; the last one approved leaves the inbox empty.
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('a-4', 'x', '{}', "
                           "'waiting_approval')")
        await until(lambda: inbox_ids(window) == ["a-3", "a-4"], what="the pushed job")
        await until(lambda: window.tabs.tabText(index) == "Approvals (2)", what="the count after a new job")
        window.job_actions.actions["approve"].trigger()
        await until(lambda: current_inbox_id(window) == "a-4", what="the last job")
        window.job_actions.actions["approve"].trigger()
        await until(lambda: window.tabs.tabText(index) == "Approvals", what="an empty inbox")
        await until(lambda: window.approvals.heading.text() == "Nothing waits for approval", what="the empty note")
        assert not window.job_actions.actions["approve"].isEnabled()
        # On the Jobs tab, the toolbar acts on the job table's selection again.
        window.tabs.setCurrentWidget(window.jobs)
        window.select_job("q-1")
        await until(lambda: [r.id for r in window.job_actions.selection] == ["q-1"], what="the table's selection")

        # Hidden, the inbox reads nothing on a change but keeps its count; shown, it catches up.
        await until(lambda: window.approvals.model._loading is None, what="the inbox idle")
        loads: list[object] = []
        real_reload = window.approvals.model.reload
        monkeypatch.setattr(window.approvals.model, "reload", lambda: (loads.append(1), real_reload())[1])
        real_apply = window.approvals.model.apply_changes
        monkeypatch.setattr(window.approvals.model, "apply_changes",
                            lambda ids: (loads.append(ids), real_apply(ids))[1])
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('a-5', 'x', '{}', "
                           "'waiting_approval')")
        await until(lambda: window.tabs.tabText(index) == "Approvals (1)", what="the count while hidden")
        assert window.approvals.gate.stale and loads == [] and inbox_ids(window) == []
        window.tabs.setCurrentWidget(window.approvals)
        await until(lambda: inbox_ids(window) == ["a-5"], what="the inbox once shown")
        assert not window.approvals.gate.stale
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_new_job_dialog(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO workers (id, host, pid, concurrency, job_types, version) VALUES "
                           "('w-1', 'h', 1, 2, '{echo,thumb.make}', 't'), ('w-2', 'h', 2, 2, '{gone}', 't')")
        await conn.execute("UPDATE workers SET state = 'stopped' WHERE id = 'w-2'")
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('dep-1', 'echo', '{}')")
        window = open_window(qtbot, test_db, JOB_PROCESSOR_MODULES="tests.desktop.input_model_processors")
        await until(lambda: window.new_job_action.isEnabled(), what="New job enabled once connected")
        assert window.new_job_action.shortcut().toString() == "Ctrl+N"
        window.new_job_action.trigger()
        dialog = window.new_job_dialog
        assert dialog is not None and dialog.isVisible()
        combo = dialog.type_combo
        await until(lambda: [combo.itemText(i) for i in range(combo.count())] == ["echo", "thumb.make"],
                    what="the types live workers serve")
        assert not dialog.ok_button.isEnabled()  # no type yet

        # A type whose processor declares an input model: a skeleton, checked as it is typed.
        combo.setCurrentText("thumb.make")
        assert json.loads(dialog.input_edit.toPlainText()) == {"url": "", "width": 128, "crop": False}
        assert "url: String should have at least 1 character" in dialog.input_error.text()
        assert dialog.input_error.isVisible() and not dialog.ok_button.isEnabled()
        dialog.input_edit.setPlainText('{"url": "https://x/cat.png", "width": 64')
        assert dialog.input_error.text().startswith("invalid JSON at line 1") and not dialog.ok_button.isEnabled()
        dialog.input_edit.setPlainText('{"url": "https://x/cat.png", "width": "wide"}')
        assert "width: Input should be a valid integer" in dialog.input_error.text()
        dialog.input_edit.setPlainText('{"url": "https://x/cat.png", "width": 64}')
        assert not dialog.input_error.isVisible() and dialog.ok_button.isEnabled()

        # A refusal from the database is shown in the dialog, which stays open.
        dialog.depends_edit.setText("dep-1, no-such-job")
        dialog.ok_button.click()
        await until(lambda: "no-such-job" in dialog.submit_error.text(), what="the refusal")
        assert dialog.isVisible() and dialog.ok_button.isEnabled()
        assert await conn.fetchval("SELECT count(*) FROM jobs") == 1

        dialog.depends_edit.setText("dep-1")
        dialog.pipeline_edit.setText("p-9")
        dialog.priority.setValue(5)
        dialog.ok_button.click()
        await until(lambda: not dialog.isVisible(), what="the dialog closing")
        row = await conn.fetchrow("SELECT id, type, input_data, pipeline_id, priority, dependent_on_jobs FROM jobs "
                                  "WHERE id = $1", dialog.job_id)
        assert (row["type"], json.loads(row["input_data"]), row["pipeline_id"], row["priority"],
                json.loads(row["dependent_on_jobs"])) == ("thumb.make", {"url": "https://x/cat.png", "width": 64},
                                                          "p-9", 5, ["dep-1"])
        await until(lambda: window.detail.job_id == dialog.job_id, what="the new job in the detail pane")

        # Free text works too, without an input model: any JSON object goes.
        window.new_job()
        second = window.new_job_dialog
        assert second is not None and second is not dialog
        second.type_combo.setCurrentText("my.own.type")
        assert second.input_edit.toPlainText() == "{}" and second.ok_button.isEnabled()
        second.input_edit.setPlainText('"text"')
        assert second.input_error.text() == "the input must be a JSON object ({…})"
        second.reject()
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_the_empty_table_says_how_to_start(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        window = open_window(qtbot, test_db)
        hint = window.jobs.empty_hint
        await until(lambda: hint.isVisible(), what="the empty-table hint")
        text = hint.text()
        assert "Ctrl+N" in text and "jobdesk submit echo --input" in text and "INSERT INTO jobs" in text
        assert hint.width() > 200 and hint.height() > 100  # it covers the table's viewport
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('j-1', 'echo', '{}')")
        await until(lambda: not hint.isVisible(), what="the hint gone once a job exists")
        window.jobs.search_edit.setText("status:failed")
        window.jobs.apply_filters()
        await until(lambda: hint.isVisible() and "No jobs match" in hint.text(), what="the no-match hint")
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())
