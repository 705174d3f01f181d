"""Edit input and retry…, search inside the input, Copy ID/input/result/error, the job table's
context menu, Export… and saved views, and opening the console on one job: offscreen, on a real
PostgreSQL."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import asyncpg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QInputDialog, QMenu

from jobdesk.console.jobs.job_sharing import export_format
from jobdesk.console.main_window import MainWindow
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_inbox_and_new_job import open_window, test_db  # noqa: F401  (a fixture)

THUMB = {"url": "https://x/cat.png", "width": 0, "crop": False}


def table_ids(window: MainWindow) -> list[str]:
    model = window.jobs.model
    return [model.row_at(i).id for i in range(model.rowCount())]  # type: ignore[union-attr]


async def _close(window: MainWindow, conn: asyncpg.Connection) -> None:
    await conn.close()
    window.close()
    await window.connection.close()


def test_edit_input_and_retry(qapp: QApplication, qtbot, test_db: str) -> None:  # noqa: F811  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data, status, error_message) VALUES "
                           "('f-1', 'thumb.make', $1::text::jsonb, 'failed', 'width must be positive'), "
                           "('q-1', 'thumb.make', '{}', 'queued', NULL)", json.dumps(THUMB))
        window = open_window(qtbot, test_db, JOB_PROCESSOR_MODULES="tests.desktop.input_model_processors")
        await until(lambda: set(table_ids(window)) == {"f-1", "q-1"}, what="the jobs")
        action = window.job_actions.actions["edit_input"]
        window.select_job("q-1")
        await until(lambda: [r.id for r in window.job_actions.selection] == ["q-1"], what="q-1 selected")
        assert not action.isEnabled()  # a queued job is not retried
        window.select_job("f-1")
        await until(lambda: action.isEnabled(), what="Edit input and retry… on the failed job")
        # It is in the table's context menu, the toolbar and the DAG's node menu (ACTIONS).
        menu = window.share.job_menu(window.share.targets())
        labels = [a.text() for a in menu.actions()]
        for label in ("Edit input and retry…", "Retry", "Cancel", "Copy ID", "Copy input", "Copy result",
                      "Copy error", "Export…", "Save view…"):
            assert label in labels, (label, labels)
        assert action in window.toolbar.actions()

        action.trigger()
        await until(lambda: window.share.edit_dialog is not None and window.share.edit_dialog.isVisible(),
                    what="the editor")
        dialog = window.share.edit_dialog
        assert dialog is not None
        assert json.loads(dialog.input_edit.toPlainText()) == THUMB
        # The input model names the wrong field; JSON that is not an object or not JSON is named too.
        dialog.input_edit.setPlainText('{"url": "", "width": 64}')
        assert "url: String should have at least 1 character" in dialog.input_error.text()
        assert not dialog.ok_button.isEnabled()
        dialog.input_edit.setPlainText('{"url": "https://x/cat.png", "width": ')
        assert dialog.input_error.text().startswith("invalid JSON at line 1") and not dialog.ok_button.isEnabled()
        dialog.input_edit.setPlainText("[1]")
        assert dialog.input_error.text() == "the input must be a JSON object ({…})"
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'f-1'") == "failed"
        new = {"url": "https://x/cat.png", "width": 64}
        dialog.input_edit.setPlainText(json.dumps(new))
        assert dialog.ok_button.isEnabled() and not dialog.input_error.isVisible()
        dialog.ok_button.click()
        await until(lambda: not dialog.isVisible(), what="the dialog closing")
        row = await conn.fetchrow("SELECT status, input_data::text FROM jobs WHERE id = 'f-1'")
        assert (row["status"], json.loads(row["input_data"])) == ("queued", new)
        audit = await conn.fetch("SELECT action, source, reason FROM audit_log ORDER BY id")
        assert [(a["action"], a["source"]) for a in audit] == [("edit input", "console"), ("retry", "console")]
        assert json.loads(audit[0]["reason"]) == THUMB
        await until(lambda: "https://x/cat.png" in window.detail.input_view.raw.toPlainText(),
                    what="the new input in the pane")
        await _close(window, conn)

    run_qasync(qapp, scenario())


def test_a_refused_retry_stays_in_the_dialog(qapp: QApplication, qtbot, test_db: str) -> None:  # noqa: F811  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('c-1', 'x', '{}', 'cancelled')")
        window = open_window(qtbot, test_db)
        await until(lambda: table_ids(window) == ["c-1"], what="the job")
        dialog = await window.share.edit_input("c-1")
        assert dialog is not None and dialog.ok_button.isEnabled()
        await conn.execute("UPDATE jobs SET status = 'queued' WHERE id = 'c-1'")  # retried by someone else
        dialog.input_edit.setPlainText('{"a": 1}')
        assert not await dialog.send({"a": 1})
        assert "cannot retry job c-1: it is queued" in dialog.submit_error.text() and dialog.isVisible()
        assert json.loads(await conn.fetchval("SELECT input_data::text FROM jobs WHERE id = 'c-1'")) == {}
        assert await conn.fetchval("SELECT count(*) FROM audit_log") == 0
        dialog.reject()
        await _close(window, conn)

    run_qasync(qapp, scenario())


def test_search_by_input_path(qapp: QApplication, qtbot, test_db: str) -> None:  # noqa: F811  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("""INSERT INTO jobs (id, type, input_data) VALUES
            ('n42', 'order', '{"order_id": 42, "user": {"plan": "business"}}'),
            ('n420', 'order', '{"order_id": 420, "user": {"plan": "businessplus"}}'),
            ('s42', 'order', '{"order_id": "42", "user": {"plan": "free plan"}}')""")
        window = open_window(qtbot, test_db)
        await until(lambda: len(table_ids(window)) == 3, what="the jobs")
        search = window.jobs.search_edit
        for text, expected in (("input.order_id:42", ["n42"]), ('input.order_id:"42"', ["s42"]),
                               ("input.user.plan:business", ["n42"]), ('input.user.plan:"free plan"', ["s42"])):
            search.setText(text)
            window.jobs.apply_filters()
            await until(lambda e=expected: table_ids(window) == e, what=f"the jobs matching {text}")  # type: ignore[misc]
            assert not window.jobs.search_error.isVisible()
        # A malformed path is one clear message under the box; the rest of the query still filters.
        search.setText("input..plan:x")
        window.jobs.apply_filters()
        await until(lambda: window.jobs.search_error.isVisible(), what="the message")
        assert "input..plan: malformed path" in window.jobs.search_error.text()
        await until(lambda: len(table_ids(window)) == 3, what="the bad term left out")
        await _close(window, conn)

    run_qasync(qapp, scenario())


def test_copy_id_input_result_and_error(qapp: QApplication, qtbot, test_db: str,  # noqa: F811  # type: ignore[no-untyped-def]
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("""INSERT INTO jobs (id, type, input_data, status, result_data, error_message) VALUES
            ('done-1', 'echo', '{"n": 1}', 'completed', '{"out": [1, 2]}', NULL),
            ('bad-1', 'echo', '{"n": 2}', 'failed', NULL, 'Traceback: boom')""")
        window = open_window(qtbot, test_db)
        await until(lambda: len(table_ids(window)) == 2, what="the jobs")
        clipboard = QApplication.clipboard()
        window.select_job("done-1")
        await until(lambda: [r.id for r in window.job_actions.selection] == ["done-1"], what="done-1 selected")
        window.share.copy_actions["id"].trigger()
        assert clipboard.text() == "done-1"
        assert window.share.copy_actions["id"].shortcut().toString() == "Ctrl+Shift+C"
        assert await window.share.copy_from_job("input", "done-1")
        assert json.loads(clipboard.text()) == {"n": 1}
        assert await window.share.copy_from_job("result", "done-1")
        assert json.loads(clipboard.text()) == {"out": [1, 2]} and "\n" in clipboard.text()  # indented JSON
        assert not await window.share.copy_from_job("error", "done-1")  # it has none: the clipboard is kept
        assert json.loads(clipboard.text()) == {"out": [1, 2]}
        assert await window.share.copy_from_job("error", "bad-1")
        assert clipboard.text() == "Traceback: boom"
        # Both rows selected: Copy ID copies both ids, one a line, from the context menu too.
        window.jobs.table.selectAll()
        await until(lambda: len(window.job_actions.selection) == 2, what="both selected")
        menu = window.share.job_menu(window.share.targets())
        copy_id = next(a for a in menu.actions() if a.text() == "Copy ID")
        assert not next(a for a in menu.actions() if a.text() == "Copy input").isEnabled()
        copy_id.trigger()
        assert sorted(clipboard.text().splitlines()) == ["bad-1", "done-1"]
        # The key still copies with a menu around (the menu's entries show the key, never take it).
        window.select_job("bad-1")
        await until(lambda: [r.id for r in window.job_actions.selection] == ["bad-1"], what="bad-1 selected")
        window.activateWindow()
        await until(lambda: window.isActiveWindow(), what="an active window")
        qtbot.keyClick(window.jobs.table, Qt.Key.Key_C,
                       Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        await until(lambda: clipboard.text() == "bad-1", what="Ctrl+Shift+C copying the id")
        qtbot.keyClick(window.jobs.table, Qt.Key.Key_Escape)  # QTest keeps the last modifiers held
        # A right-click on a row selects it (when it was not) and opens the menu on it.
        table = window.jobs.table
        row = window.jobs.model.row_of("done-1")
        assert row is not None
        shown: list[QMenu] = []  # popped up offscreen, a menu would warn that it cannot grab the keyboard
        monkeypatch.setattr(window.share, "popup", lambda menu, _where: shown.append(menu))
        table.customContextMenuRequested.emit(table.visualRect(window.jobs.model.index(row, 1)).center())
        assert [r.id for r in window.job_actions.selection] == ["done-1"]
        assert len(shown) == 1 and "Copy result" in [a.text() for a in shown[0].actions()]
        # The DAG node's menu has the copies too.
        node_menu = window.pipelines.node_menu("done-1")  # no graph shown: an empty menu, no crash
        assert node_menu.actions() == []
        await _close(window, conn)

    run_qasync(qapp, scenario())


def test_export_the_filter_to_csv_and_jsonl(qapp: QApplication, qtbot, test_db: str,  # noqa: F811  # type: ignore[no-untyped-def]
                                            tmp_path: Path) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        tricky = 'said "no", then\nleft'
        await conn.execute("""INSERT INTO jobs (id, type, input_data, status, error_message) VALUES
            ('a', 'pdf', '{"k": 1}', 'failed', $1), ('b', 'pdf', '{"k": 2}', 'queued', NULL),
            ('c', 'mail', '{"k": 1}', 'failed', 'x')""", tricky)
        columns = [r["column_name"] for r in await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs' ORDER BY ordinal_position")]
        window = open_window(qtbot, test_db)
        await until(lambda: len(table_ids(window)) == 3, what="the jobs")
        window.jobs.search_edit.setText("input.k:1")
        window.jobs.apply_filters()
        await until(lambda: sorted(table_ids(window)) == ["a", "c"], what="the filter")
        target = tmp_path / "jobs.csv"
        assert await window.share.export_to(str(target), "csv", window.jobs.current_filter()) == 2
        with open(target, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        assert rows[0][0] == "id" and sorted(rows[0]) == sorted(columns)
        by_id = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
        assert set(by_id) == {"a", "c"} and by_id["a"]["error_message"] == tricky
        assert json.loads(by_id["a"]["input_data"]) == {"k": 1} and by_id["a"]["type"] == "pdf"
        assert not (tmp_path / "jobs.csv.part").exists()

        lines_file = tmp_path / "jobs.jsonl"
        assert await window.share.export_to(str(lines_file), "jsonl", window.jobs.current_filter()) == 2
        lines = [json.loads(line) for line in lines_file.read_text(encoding="utf-8").splitlines()]
        assert [j["id"] for j in lines] == ["c", "a"] and all(list(j)[0] == "id" for j in lines)
        # A folder that does not exist: one message, and no file half-written.
        errors: list[str] = []
        window.job_actions.error.connect(errors.append)
        missing = str(tmp_path / "nope" / "x.csv")
        assert await window.share.export_to(missing, "csv", window.jobs.current_filter()) is None
        assert errors and errors[0].startswith("export failed")
        assert export_format("out.jsonl") == "jsonl" and export_format("out.csv") == "csv"
        assert export_format("out", "JSON lines (*.jsonl)") == "jsonl"
        await _close(window, conn)

    run_qasync(qapp, scenario())


def test_saved_views_per_connection(qapp: QApplication, qtbot, test_db: str,  # noqa: F811  # type: ignore[no-untyped-def]
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("""INSERT INTO jobs (id, type, input_data, status) VALUES
            ('a', 'pdf', '{"plan": "business"}', 'failed'), ('b', 'pdf', '{"plan": "free"}', 'failed'),
            ('c', 'mail', '{"plan": "business"}', 'queued')""")
        window = open_window(qtbot, test_db)
        await until(lambda: len(table_ids(window)) == 3, what="the jobs")
        jobs = window.jobs
        jobs.type_edit.setText("pdf")
        jobs.search_edit.setText("input.plan:business")
        jobs.apply_filters()
        await until(lambda: table_ids(window) == ["a"], what="the filter")
        monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("business pdfs", True))
        jobs.views.save_action.trigger()
        assert list(jobs.views.views()) == ["business pdfs"]
        assert not jobs.views.save("   ")  # a view needs a name
        jobs.type_edit.clear()
        jobs.search_edit.clear()
        jobs.apply_filters()
        await until(lambda: len(table_ids(window)) == 3, what="the filter cleared")
        # Picked from the Views menu, the view filters again.
        jobs.views._fill_menu()
        pick = next(a for a in jobs.views.menu.actions() if a.text() == "business pdfs")
        pick.trigger()
        assert jobs.type_edit.text() == "pdf" and jobs.search_edit.text() == "input.plan:business"
        await until(lambda: table_ids(window) == ["a"], what="the view applied")
        # Another connection profile has its own views.
        jobs.views.use_profile("another database")
        assert jobs.views.views() == {}
        jobs.views.use_profile(window.connection.describe())
        assert jobs.views.delete("business pdfs") and jobs.views.views() == {}
        await _close(window, conn)

    run_qasync(qapp, scenario())


def test_open_the_console_on_a_job(qapp: QApplication, qtbot, test_db: str) -> None:  # noqa: F811  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'bulk', '{}' FROM generate_series(1, 300)")
        await conn.execute("INSERT INTO jobs (id, type, input_data, created_at) VALUES "
                           "('old-1', 'echo', '{}', now() - interval '1 day')")
        window = open_window(qtbot, test_db)
        window.share.open_job("old-1")  # as `jobdesk open old-1` does, before the first page arrives
        await until(lambda: window.detail.job_id == "old-1", what="the job in the detail pane")
        await until(lambda: [r.id for r in window.jobs.selected_rows()] == ["old-1"], what="its row selected")
        assert window.tabs.currentWidget() is window.jobs
        await _close(window, conn)

    run_qasync(qapp, scenario())
