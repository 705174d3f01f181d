"""A bulk run and the console's live updates, offscreen, against a real PostgreSQL: while the run
goes, its flood of changes refreshes the console rarely; when it ends, the table, the counts and
the tabs show the final state. A live reload of the same page keeps the model and the selection,
and the clock redraws only the columns that follow it."""

from __future__ import annotations

import asyncio
import time

import asyncpg
from PySide6.QtCore import QEvent, QObject, QPoint
from PySide6.QtGui import QRegion
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from jobdesk.console.connection import COALESCE_S
from jobdesk.console.jobs.bulk_action import BulkActions
from jobdesk.console.jobs.job_table_model import COL_CREATED, COL_ID, COL_TYPE
from jobdesk.core.models import Status
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_bulk_and_failures import fill
from tests.desktop.test_console import ids_shown, open_window, test_db  # noqa: F401


class PaintedRegions(QObject):
    """The regions of the paint events a widget gets."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__(widget)
        self.regions: list[QRegion] = []
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.Paint:
            self.regions.append(QRegion(event.region()))  # type: ignore[attr-defined]
        return False


async def retry_all_failed(bulk: BulkActions) -> None:
    bulk.actions["retry"].trigger()
    box = await until(lambda: bulk.confirm_box, timeout=5, what="the confirmation")
    box.button(QMessageBox.StandardButton.Yes).click()


def test_bulk_run_coalesces_reloads_and_shows_the_final_state(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                              test_db: str) -> None:  # noqa: F811
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await fill(conn, 4500, "pdf", "p")
        window = open_window(qtbot, test_db)
        await until(lambda: window.connection.is_connected and window.bulk.writable, what="connection")
        window.jobs.status_buttons[None].setChecked(False)
        window.jobs.status_buttons[Status.FAILED].setChecked(True)
        window.jobs.apply_filters()
        await until(lambda: window.bulk.actions["retry"].text() == "Retry all 4,500 matching…", what="the counts")
        await until(lambda: window.model.rowCount() == 200, what="the first page")
        window.tabs.setCurrentWidget(window.failures)
        await until(lambda: window.failures.model.rowCount() == 1, what="the failure group")

        changes: list[tuple[float, set[str] | None]] = []
        during_run: list[set[str] | None] = []

        def changed(ids: set[str] | None) -> None:
            (during_run if window.bulk.busy() else changes).append((time.monotonic(), ids))

        window.connection.jobs_changed.connect(changed)
        window.connection.bulk_coalesce_s = 60.0  # nothing refreshes while the run goes
        await retry_all_failed(window.bulk)
        run = await until(lambda: window.bulk.run, what="the run")
        await until(lambda: run.outcome, what="the run's end")
        ended = time.monotonic()
        assert run.chunks == 5
        assert during_run == [], "no refresh while the run goes"
        changes = [(at, ids) for at, ids in changes if at >= ended]  # before the run started: not its own

        # One full refresh right after the run: the table, the counts and the tabs show the final state.
        await until(lambda: changes, timeout=5, what="the refresh after the run")
        assert changes[0][1] is None and changes[0][0] - ended < 2
        await until(lambda: window.failures.model.rowCount() == 0, what="the Failures tab emptied")
        # The Jobs tab, hidden meanwhile, read nothing; shown again, it reads the final state.
        window.tabs.setCurrentWidget(window.jobs)
        await until(lambda: window.model.rowCount() == 0, what="no failed job left in the table")
        await until(lambda: window.jobs.status_buttons[Status.QUEUED].text().endswith(" 4,500")
                    and window.jobs.status_buttons[Status.FAILED].text().endswith(" 0"), what="the final counts")
        await until(lambda: window.bulk.actions["retry"].text() == "Retry all 0 matching…", what="the action's count")
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued'") == 4500
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=60)


def test_changes_during_a_bulk_run_refresh_at_most_once_per_interval(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                                     test_db: str) -> None:  # noqa: F811
    async def scenario() -> None:
        window = open_window(qtbot, test_db)
        connection = window.connection
        await until(lambda: connection.is_connected, what="connection")
        await asyncio.sleep(COALESCE_S + 0.2)  # the refresh after connecting has gone
        changes: list[set[str] | None] = []
        connection.jobs_changed.connect(changes.append)
        connection.bulk_coalesce_s = 0.8
        with connection.bulk_changes():
            start = time.monotonic()
            while time.monotonic() - start < 1.2:  # a chunk's NOTIFY every 50 ms
                connection._on_notify("*")
                await asyncio.sleep(0.05)
            assert changes == [None], "one refresh in 1.2 s, not one per COALESCE_S"
            connection._on_notify("a,b")
        await asyncio.sleep(COALESCE_S + 0.25)  # the end of the run brings the final refresh soon after
        assert changes == [None, None]
        connection._on_notify("c")  # after the run, changes come at the usual pace again
        await asyncio.sleep(COALESCE_S + 0.25)
        assert changes == [None, None, {"c"}]
        window.close()
        await connection.close()

    run_qasync(qapp, scenario(), timeout=30)


def test_live_reload_keeps_the_selection_and_the_clock_redraws_little(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                                      qtmodeltester, test_db: str) -> None:  # noqa: F811
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await fill(conn, 3, "pdf", "p")
        window = open_window(qtbot, test_db)
        await until(lambda: window.connection.is_connected and window.model.rowCount() == 3, what="the rows")
        model = window.model
        qtmodeltester.check(model)
        window.jobs.select_job("p00002")
        resets: list[int] = []
        changed: list[int] = []
        model.modelReset.connect(lambda: resets.append(1))
        model.dataChanged.connect(lambda first, _last, _roles=(): changed.append(first.row()))
        loads: list[int] = []
        model.loaded.connect(lambda: loads.append(1))

        model.reload()  # the same rows: nothing to repaint
        await until(lambda: loads, what="the reload")
        assert resets == [] and changed == []
        await conn.execute("UPDATE jobs SET status = 'queued' WHERE id = 'p00002'")
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('p00009', 'pdf', '{}')")
        loads.clear()
        model.reload()
        await until(lambda: loads, what="the second reload")
        assert resets == [] and ids_shown(window) == ["p00009", "p00003", "p00002", "p00001"]
        assert model.row_at(2).status == Status.QUEUED  # type: ignore[union-attr]
        assert len(changed) == 1, "one changed row, repainted alone (before the new row above it came)"
        assert [r.id for r in window.jobs.selected_rows()] == ["p00002"], "the selection stays"
        qtmodeltester.check(model)

        # The clock's tick each second redraws only the columns whose text follows it.
        viewport = window.jobs.table.viewport()
        painted = PaintedRegions(viewport)
        await asyncio.sleep(0.3)
        painted.regions.clear()
        window.jobs._tick()
        await until(lambda: painted.regions, what="the tick's repaint")
        region = painted.regions[0]
        table = window.jobs.table
        assert region.contains(QPoint(table.columnViewportPosition(COL_CREATED) + 5, 5))
        assert not region.contains(QPoint(table.columnViewportPosition(COL_ID) + 5, 5))
        assert not region.contains(QPoint(table.columnViewportPosition(COL_TYPE) + 5, 5))

        window.jobs.type_edit.setText("pdf")  # a new filter still resets
        loads.clear()
        window.jobs.apply_filters()
        await until(lambda: loads, what="the new query")
        assert resets == [1]
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=30)


def test_a_refresh_keeps_the_rows_scrolled_to(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """A refresh of the same query (Refresh, or the reload after LISTEN reconnects) reloaded the
    first page alone and dropped the rows past it, with the place of someone reading them. It
    now reloads as many pages as were shown; a new filter still starts from the first page."""
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await fill(conn, 450, "pdf", "p")
        window = open_window(qtbot, test_db)
        await until(lambda: window.connection.is_connected and window.model.rowCount() == 200, what="the first page")
        model = window.model

        def scrolled_to_the_end() -> bool:  # as a view asks while scrolled down (it is ignored while a load runs)
            if model.rowCount() == 450:
                return True
            model.fetchMore()
            return False

        await until(scrolled_to_the_end, what="all 450 rows")
        assert window.jobs.select_job("p00010")  # near the bottom (newest first)
        await conn.execute("UPDATE jobs SET status = 'queued' WHERE id = 'p00010'")
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('p00999', 'pdf', '{}')")
        resets: list[int] = []
        model.modelReset.connect(lambda: resets.append(1))
        loads: list[int] = []  # the rows held as each load lands
        model.loaded.connect(lambda: loads.append(model.rowCount()))
        model.reload()
        await until(lambda: loads, what="the refresh")
        assert resets == [] and model.rowCount() == 451
        assert ids_shown(window) == ["p00999"] + [f"p{n:05d}" for n in range(450, 0, -1)]
        assert model.row_at(model.row_of("p00010")).status == Status.QUEUED  # type: ignore[arg-type, union-attr]
        assert [r.id for r in window.jobs.selected_rows()] == ["p00010"], "the selection stays"

        window.jobs.type_edit.setText("pdf")  # a new filter starts from the first page
        loads.clear()
        window.jobs.apply_filters()
        await until(lambda: loads, what="the new query")
        # The first page, as it lands: the view, still scrolled to the bottom, may then ask for more.
        assert resets == [1] and loads[0] == 200
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=30)
