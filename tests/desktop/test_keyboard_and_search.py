"""Keys, the search box's terms, column choices per profile and the layout at 1280×800, offscreen
on a real PostgreSQL."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QLabel

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.jobs.job_table_model import COL_ERROR, COL_PIPELINE, COL_USER
from jobdesk.console.main_window import MainWindow
from jobdesk.console.shortcuts import ShortcutsDialog
from jobdesk.core.settings import load_settings
from jobdesk.core.version import __version__
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def open_window(qtbot, dsn: str) -> MainWindow:  # type: ignore[no-untyped-def]
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn), embedded=False)
    window = MainWindow(connection)
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    connection.start()
    return window


def ids_shown(window: MainWindow) -> list[str]:
    return [window.model.row_at(i).id for i in range(window.model.rowCount())]  # type: ignore[union-attr]


def current_id(window: MainWindow) -> str | None:
    rows = window.jobs.selected_rows()
    return rows[0].id if len(rows) == 1 else None


async def seed(conn: asyncpg.Connection) -> None:
    await conn.execute("""INSERT INTO jobs (id, type, input_data, status, error_message, pipeline_id) VALUES
        ('j-1', 'video.render', '{}', 'failed', 'TimeoutError: upstream slow', 'p-1'),
        ('j-2', 'video.script', '{}', 'queued', NULL, 'p-1'),
        ('j-3', 'email', '{}', 'failed', 'SMTPError: 550', NULL),
        ('j-4', 'videoXrender', '{}', 'failed', 'timeout', NULL)""")


def test_keys_and_the_shortcut_list(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await seed(conn)
        window = open_window(qtbot, test_db)
        await until(lambda: ids_shown(window) == ["j-4", "j-3", "j-2", "j-1"], what="the rows")
        await asyncio.sleep(0.5)  # the reload that follows connecting
        window.activateWindow()
        await until(lambda: window.isActiveWindow(), what="an active window")
        table, search = window.jobs.table, window.jobs.search_edit
        table.setFocus()

        # j / k move in the table.
        qtbot.keyClick(table, Qt.Key.Key_J)
        assert current_id(window) == "j-4"
        qtbot.keyClick(table, Qt.Key.Key_J)
        qtbot.keyClick(table, Qt.Key.Key_J)
        assert current_id(window) == "j-2"
        qtbot.keyClick(table, Qt.Key.Key_K)
        assert current_id(window) == "j-3"
        await until(lambda: window.detail.job_id == "j-3", what="the detail pane following j / k")

        # / goes to the search box; there, j and k are text, not moves.
        qtbot.keyClick(table, "/")
        assert search.hasFocus()
        qtbot.keyClicks(search, "jk")
        assert search.text() == "jk" and current_id(window) == "j-3"
        search.clear()

        # ? lists every shortcut, read from the window's actions.
        qtbot.keyClick(table, "?")
        dialog = window.shortcuts_dialog
        assert isinstance(dialog, ShortcutsDialog) and dialog.isVisible()
        listed = {dialog.table.item(i, 0).text() for i in range(dialog.table.rowCount())}
        for action in window.findChildren(QAction):
            if not action.shortcut().isEmpty():
                assert action.shortcut().toString() in listed, action.text()
        assert {"/", "J", "K", "?", "F1", "Ctrl+N", "Ctrl+Return", "Ctrl+Shift+J", "Ctrl+K"} <= listed
        dialog.close()

        # F1: the About box names the version the package was built with, and the database.
        qtbot.keyClick(table, Qt.Key.Key_F1)
        about = window.about_dialog
        assert about is not None and about.isVisible()
        assert f"jobdesk {__version__}" in about.findChild(QLabel).text()
        assert f"Database: {window.connection.describe()}" in about.body.text().splitlines()
        about.close()
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_search_terms_filter_on_the_server(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await seed(conn)
        window = open_window(qtbot, test_db)
        await until(lambda: len(ids_shown(window)) == 4, what="the rows")
        jobs = window.jobs
        jobs.search_edit.setText('status:failed type:video.* error:"timeout"')
        jobs.apply_filters()
        await until(lambda: ids_shown(window) == ["j-1"], what="the filtered rows")
        assert not jobs.search_error.isVisible()
        # Bad terms are named under the box; the good ones still filter, and nothing crashes.
        jobs.search_edit.setText("status:broken colour:red user:me pipeline:p-1")
        jobs.apply_filters()
        await until(lambda: ids_shown(window) == ["j-2", "j-1"], what="the pipeline's rows")
        message = jobs.search_error.text()
        assert jobs.search_error.isVisible()
        assert "unknown status 'broken'" in message and "unknown key 'colour'" in message and "'me' is not a number" \
            in message
        # A live change is matched against the terms too: j-3 failing with a timeout joins.
        jobs.search_edit.setText("error:timeout")
        jobs.apply_filters()
        await until(lambda: ids_shown(window) == ["j-4", "j-1"], what="the error rows")
        assert not jobs.search_error.isVisible()
        await conn.execute("UPDATE jobs SET error_message = 'ReadTimeout' WHERE id = 'j-3'")
        await until(lambda: ids_shown(window) == ["j-4", "j-3", "j-1"], what="the live row")

        # Completion offers the keys for the word being typed, and keeps what came before.
        completer = jobs.search_edit.completer_
        jobs.search_edit.setText("error:x sta")
        assert completer.splitPath(jobs.search_edit.text()) == ["sta"]
        completer.setCompletionPrefix("sta")
        offered = [completer.completionModel().index(i, 0).data()
                   for i in range(completer.completionModel().rowCount())]
        assert offered[0] == "status:" and "status:failed" in offered
        assert completer.pathFromIndex(completer.completionModel().index(0, 0)) == "error:x status:"
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_layout_and_columns_per_profile(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await seed(conn)
        for i in range(6):
            await conn.execute("INSERT INTO workers (id, host, pid, concurrency, job_types, version) "
                               "VALUES ($1, 'h', $2, 2, '{echo}', 't')", f"w-{i}", i)
        window = open_window(qtbot, test_db)
        await until(lambda: len(ids_shown(window)) == 4, what="the rows")
        await asyncio.sleep(0.3)  # the layout settles
        table = window.jobs.table
        # At 1280×800, the default columns fit without scrolling sideways...
        assert window.size().width() == 1280 and window.size().height() == 800
        assert not table.horizontalScrollBar().isVisible()
        assert table.horizontalHeader().length() <= table.viewport().width()
        assert table.columnWidth(COL_ERROR) >= 100  # and the error still has room
        # ... and the Workers dock, opened from the toolbar (it is closed by default), shows at least 5 workers.
        assert not window.workers.dock.isVisible()
        window.workers.dock_action.trigger()
        await asyncio.sleep(0.3)  # the layout settles
        workers = window.workers.panel
        await until(lambda: workers.model.rowCount() == 6, what="the workers")
        fifth = workers.table.visualRect(workers.model.index(4, 0))
        assert fifth.isValid() and fifth.bottom() <= workers.table.viewport().height()

        # The header's menu hides a column; the choice and the widths are kept for this database.
        columns = window.jobs.columns
        menu = columns.menu()
        titles = [a.text() for a in menu.actions() if a.isCheckable()]
        assert titles[COL_PIPELINE] == "Pipeline" and not menu.actions()[COL_USER].isChecked()
        menu.actions()[COL_PIPELINE].setChecked(False)
        menu.actions()[COL_USER].setChecked(True)
        table.setColumnWidth(1, 171)
        assert table.isColumnHidden(COL_PIPELINE) and not table.isColumnHidden(COL_USER)
        window.stop_timers()  # saves what is waiting to be saved
        window.close()
        await window.connection.close()

        again = open_window(qtbot, test_db)
        assert again.jobs.table.isColumnHidden(COL_PIPELINE) and not again.jobs.table.isColumnHidden(COL_USER)
        assert again.jobs.table.columnWidth(1) == 171
        # Another profile keeps its own (here: the defaults).
        again.jobs.columns.use_profile("another database")
        assert not again.jobs.table.isColumnHidden(COL_PIPELINE) and again.jobs.table.isColumnHidden(COL_USER)
        # "Default columns" puts them back, and the last visible column cannot be hidden.
        again.jobs.columns.use_profile(again.connection.describe())
        again.jobs.columns.reset()
        assert not again.jobs.table.isColumnHidden(COL_PIPELINE)
        for col in range(again.jobs.table.model().columnCount(QModelIndex())):
            again.jobs.columns.set_visible(col, False)
        assert again.jobs.columns.visible_columns() == [again.jobs.table.model().columnCount(QModelIndex()) - 1]
        await conn.close()
        again.close()
        await again.connection.close()

    run_qasync(qapp, scenario())


def test_selecting_a_job_replaces_the_selection_whatever_keys_were_last_held(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await seed(conn)
        window = open_window(qtbot, test_db)
        await until(lambda: len(ids_shown(window)) == 4, what="the rows")
        # A shortcut with Ctrl leaves Ctrl as the application's last known modifier.
        qtbot.keyClick(window.jobs.table, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
        for job_id in ("j-1", "j-3", "j-3"):
            assert window.jobs.select_job(job_id)
        assert [row.id for row in window.jobs.selected_rows()] == ["j-3"], "selected alone, not added or toggled"
        await until(lambda: [row.id for row in window.job_actions.selection] == ["j-3"], what="the actions' job")
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())
