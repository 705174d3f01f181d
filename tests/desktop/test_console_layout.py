"""The console's look and layout, as behaviour: what the detail pane says (the worker, what a job
waits for, runs apart from retries), where the job pane shows, the attempts table within its
pane, a selected row that stays in view while jobs arrive, the metrics read for numbers, the text
size, and the status bar."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication

from jobdesk.console.connection import COALESCE_S, ConsoleConnection
from jobdesk.console.jobs.job_table_model import COL_TYPE
from jobdesk.console.main_window import MainWindow
from jobdesk.console.metrics.metrics_tab import describe_retention, describe_size
from jobdesk.console.theme import TEXT_POINTS, apply_style
from jobdesk.core.settings import load_settings
from jobdesk.store import rollup as stats_rollup
from jobdesk.store.table_size import LastPrune, TableSize
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def open_window(qtbot, dsn: str, size: tuple[int, int] = (1280, 900)) -> MainWindow:  # type: ignore[no-untyped-def]
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn), embedded=False)
    window = MainWindow(connection)
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    connection.start()
    return window


async def close(window: MainWindow) -> None:
    window.stop_timers()
    window.close()
    await window.connection.close()


def meta(window: MainWindow, key: str) -> str:
    return window.detail.meta_labels[key].text()


def test_the_detail_pane_names_the_worker_what_a_job_waits_for_and_runs_apart_from_retries(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("""
            INSERT INTO jobs (id, type, input_data, status, attempts, retry_count, error_message, updated_at)
            VALUES ('failed-3', 'email', '{}', 'failed', 3, 2, 'SMTPError: 550', now()),
                   ('durable-3', 'video.render', '{}', 'waiting_approval', 3, 0, NULL, now() - interval '5 minutes')""")
        await conn.execute("""
            INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, finished_at, outcome, error_message)
            VALUES ('failed-3', 1, 'vm-1-aaaa', now() - interval '3 min', now() - interval '179 s', 'failed', 'e1'),
                   ('failed-3', 2, 'vm-2-bbbb', now() - interval '2 min', now() - interval '119 s', 'failed', 'e2'),
                   ('failed-3', 3, 'vm-3-cccc', now() - interval '1 min', now() - interval '59 s', 'failed', 'e3'),
                   ('durable-3', 1, 'vm-1-aaaa', now() - interval '9 min', now() - interval '8 min', 'suspended',
                    'sleeping'),
                   ('durable-3', 2, 'vm-1-aaaa', now() - interval '7 min', now() - interval '6 min', 'suspended',
                    'waiting for event')""")
        window = open_window(qtbot, test_db)
        await until(lambda: window.model.rowCount() == 2, what="the rows")

        window.select_job("failed-3")
        await until(lambda: window.detail.job_id == "failed-3", what="the failed job")
        assert meta(window, "Worker") == "vm-3-cccc", "the worker of the last run, from job_attempts"
        assert meta(window, "Runs") == "3" and meta(window, "Retries") == "2 used"

        window.select_job("durable-3")
        await until(lambda: window.detail.job_id == "durable-3", what="the durable job")
        assert meta(window, "Waiting") == "waits for approval (since 5m ago)"
        assert meta(window, "Runs") == "3: 1 try, resumed 2× after a suspension"
        assert meta(window, "Retries") == "0 used", "suspensions are not retries"
        assert "Attempts" not in window.detail.meta_labels
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_the_job_pane_shows_only_where_a_job_is_selected(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                        test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) "
                           "VALUES ('w-1', 'review', '{}', 'waiting_approval'), ('q-1', 'echo', '{}', 'queued')")
        window = open_window(qtbot, test_db)
        await until(lambda: window.model.rowCount() == 2, what="the rows")
        window.select_job("w-1")
        await until(lambda: window.detail.job_id == "w-1", what="the pane")
        assert window.pane.area.isVisible() and window.job_actions.actions["approve"].isEnabled()
        tables_width = window.tabs.width()

        for tab in (window.schedules, window.metrics, window.approvals):
            window.tabs.setCurrentWidget(tab)
            await until(lambda: not window.pane.area.isVisible(), what="the pane hidden")
            await until(lambda: window.tabs.width() > tables_width + 200, what="the tab taking the pane's room")
        window.tabs.setCurrentWidget(window.schedules)
        await asyncio.sleep(0.1)
        assert not window.job_actions.actions["approve"].isEnabled(), "no unrelated job to approve on Schedules"
        window.tabs.setCurrentWidget(window.metrics)
        assert not window.job_actions.actions["approve"].isEnabled()

        for tab in (window.pipelines, window.failures):
            window.tabs.setCurrentWidget(tab)
            await until(lambda: window.pane.area.isVisible(), what="the pane shown")
            assert window.detail.job_id is None, "no job chosen on this tab: not the Jobs tab's job"
        # On Failures the actions act on the failure the pane shows, never on the Jobs tab's selection.
        assert not window.job_actions.actions["approve"].isEnabled(), "not the Jobs tab's waiting job on Failures"
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('f-1', 'echo', '{}', 'failed')")
        window.failures.job_clicked.emit("f-1")  # a group's newest failure
        await until(lambda: window.job_actions.actions["retry"].isEnabled(), what="Retry of the failure shown")
        assert not window.job_actions.actions["approve"].isEnabled()
        window.tabs.setCurrentWidget(window.pipelines)
        window.pipelines.job_clicked.emit("q-1")  # a DAG node clicked on Pipelines
        await until(lambda: window.detail.job_id == "q-1", what="the node's job")
        window.tabs.setCurrentWidget(window.jobs)
        await until(lambda: window.job_actions.actions["approve"].isEnabled(), what="the Jobs tab's selection")
        await until(lambda: window.detail.job_id == "w-1", what="the Jobs tab's job again")
        window.tabs.setCurrentWidget(window.pipelines)
        await until(lambda: window.detail.job_id == "q-1", what="the Pipelines tab's job again")
        window.tabs.setCurrentWidget(window.jobs)

        # The Workers dock is closed by default, opened from the toolbar, and remembered.
        assert not window.workers.dock.isVisible()
        assert window.workers.dock_action in window.toolbar.actions()
        rows_before = window.jobs.table.viewport().height()
        window.workers.dock_action.trigger()
        await until(lambda: window.workers.dock.isVisible(), what="the dock")
        await asyncio.sleep(0.1)
        assert window.jobs.table.viewport().height() < rows_before
        again = open_window(qtbot, test_db)
        assert not again.workers.dock.isHidden(), "the choice is kept"
        await conn.close()
        await close(again)
        await close(window)

    run_qasync(qapp, scenario())


def test_the_attempts_table_fits_its_pane(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        job_id = "01a249c7-a40f-7095-a206-b75955cedd29"  # a full-length id, as the title shows it
        await conn.execute("INSERT INTO jobs (id, type, input_data, status, attempts, retry_count, error_message) "
                           "VALUES ($1, 'video.render', '{}', 'failed', 3, 2, 'boom')", job_id)
        long_error = "ConnectionError: upstream smtp.example.com refused the connection after a long wait " * 3
        await conn.execute("""
            INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, finished_at, outcome, error_message)
            SELECT $1, n, 'vm-1', now() - interval '1 min', now(), 'failed', $2 FROM generate_series(1, 3) n""",
                           job_id, long_error)
        window = open_window(qtbot, test_db)
        await until(lambda: window.model.rowCount() == 1, what="the row")
        window.select_job(job_id)
        await until(lambda: window.detail.job_id == job_id, what="the pane")
        window.detail.tabs.setCurrentIndex(window.detail.tabs.count() - 1)  # History
        await asyncio.sleep(0.3)
        history = window.detail.history
        assert history.isVisible()
        assert not history.horizontalScrollBar().isVisible(), "no sideways scroll bar"
        assert history.horizontalHeader().length() <= history.viewport().width() + 1
        finished = history.item(0, 2).text()
        assert history.columnWidth(2) >= history.fontMetrics().horizontalAdvance(finished), "the time on one line"
        assert history.item(0, 4).toolTip() == long_error, "the whole error in the tooltip"
        # Nothing in the pane reaches past its right edge: the title, the timeline's end label.
        area = window.pane.area
        assert not area.horizontalScrollBar().isVisible()
        assert window.detail.width() <= area.viewport().width()
        assert window.detail.title.width() <= area.viewport().width()
        assert job_id in window.detail.title.text()
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_the_selected_row_stays_in_view_as_jobs_arrive(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                       test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data) "
                           "SELECT 'old-' || lpad(n::text, 3, '0'), 'echo', '{}' FROM generate_series(1, 30) n")
        window = open_window(qtbot, test_db)
        table = window.jobs.table
        await until(lambda: window.model.rowCount() == 30, what="the rows")
        window.select_job("old-028")  # the third row from the top
        await until(lambda: window.detail.job_id == "old-028", what="the pane")
        y_before = table.rowViewportPosition(window.model.row_of("old-028") or 0)

        # Rows arrive above it, in bursts, as a busy queue sends them. The first comes in above it and
        # the view keeps it where it was; scrolled so, the table holds still (only the rows on
        # screen are kept up to date) and reads what arrived above once back at the top.
        for burst in range(4):
            await conn.execute("INSERT INTO jobs (id, type, input_data) SELECT 'new-' || $1 || '-' || n, 'echo', '{}' "
                               "FROM generate_series(1, 10) n", str(burst))
            if burst == 0:
                await until(lambda: window.model.row_of("new-0-10") is not None, what="the first burst")
            else:
                await asyncio.sleep(COALESCE_S + 0.2)
        await conn.execute("UPDATE jobs SET status = 'cancelled' WHERE id = 'old-027'")  # on screen: kept up to date
        await until(lambda: str(window.model.row_at(window.model.row_of("old-027") or 0).status)  # type: ignore[union-attr]
                    == "cancelled", what="the change on screen")
        row = window.model.row_of("old-028")
        assert row is not None and row >= 10
        assert [r.id for r in window.jobs.selected_rows()] == ["old-028"], "still selected"
        rect = table.visualRect(window.model.index(row, 0))
        assert rect.top() >= 0 and rect.bottom() <= table.viewport().height(), "still in view"
        assert abs(table.rowViewportPosition(row) - y_before) <= table.rowHeight(row), "and where it was"

        # With nothing selected at the top of the table, what arrived meanwhile shows, and new rows as they come.
        table.clearSelection()
        table.scrollToTop()
        await until(lambda: window.model.row_of("new-3-10") is not None, what="the rows that arrived meanwhile")
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('newest', 'echo', '{}')")
        await until(lambda: window.model.row_of("newest") == 0, what="the newest row")
        await asyncio.sleep(0.1)
        assert table.verticalScrollBar().value() == 0 and table.rowAt(0) == 0
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


async def record(conn: asyncpg.Connection, job_type: str, n: int, *, run_s: float, completed: bool = True) -> None:
    """Add n attempts to the rollup, as the worker that ran them would."""
    rollup = stats_rollup.Rollup()
    for _ in range(n):
        rollup.attempt_ended(job_type, 0.5, run_s, completed=completed, failed=not completed, at=time.time() - 300)
    await stats_rollup.write(conn, rollup.take())


def test_metrics_start_at_zero_read_under_the_cursor_and_filter_by_type(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await record(conn, "pdf.render", 30, run_s=2.0)
        await record(conn, "mail", 6, run_s=0.05)
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'mail', '{}' FROM generate_series(1, 40)")
        await stats_rollup.sample_depth(conn)
        window = open_window(qtbot, test_db)
        tab = window.metrics
        window.tabs.setCurrentWidget(tab)
        await until(lambda: tab.metrics is not None, what="the first read")
        assert not window.pane.area.isVisible()

        # Each time axis begins at 0, and the depth's axis reaches above its highest point.
        for chart in (tab.throughput_chart, tab.depth_chart):
            low, high = chart.y_range()
            assert -0.05 * high <= low <= 0 and chart.y_labels()[0] == 0
        assert tab.depth_chart.y_range()[1] >= 40
        # The bars carry their values.
        labels = tab.run_chart.label_texts()  # p50 and p95 of two types: mail (~50 ms), pdf.render (~2 s)
        assert len(labels) == 4 and sum(t.endswith(" ms") for t in labels) == 2
        assert sum(t.endswith("s") and not t.endswith(" ms") for t in labels) == 2

        # The value under the cursor: move over the run chart's first row, then the throughput chart.
        plot = tab.run_chart.plot
        vb = plot.getPlotItem().vb
        scene_pos = vb.mapViewToScene(QPointF(0.0, 0.0))
        plot.scene().sigMouseMoved.emit(scene_pos)
        assert tab.run_chart.readout.text().startswith("mail · p50 ")
        tp = tab.throughput_chart
        xs = tab.completed_curve.getData()[0]
        peak = max(range(len(xs)), key=lambda i: tab.completed_curve.getData()[1][i])
        tp.plot.scene().sigMouseMoved.emit(tp.plot.getPlotItem().vb.mapViewToScene(QPointF(xs[peak], 1.0)))
        assert tp.readout.text().split(" · ")[1:] == ["completed 36/min", "failed 0/min"]

        # A range and a type chosen: the charts read that type alone.
        tab.window_combo.setCurrentText("Last 6 hours")
        tab.type_combo.setCurrentText("pdf.render")
        tab.refresh(changed=True)
        await until(lambda: tab.metrics is not None and tab.metrics.window.label == "6h"
                    and [lat.type for lat in tab.metrics.latency] == ["pdf.render"], what="the filtered read")
        assert tab.metrics.completed == 30  # type: ignore[union-attr]
        assert "pdf.render" in tab.throughput_chart.legend.text()
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_text_size_follows_the_keys_and_is_kept(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        window = open_window(qtbot, test_db)
        await until(lambda: window.connection.is_connected, what="connection")
        table = window.jobs.table
        size_before = QApplication.font().pointSizeF()
        width_before, row_before = table.columnWidth(COL_TYPE), table.verticalHeader().defaultSectionSize()
        window.setFocus()
        for _ in range(3):
            qtbot.keyClick(window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
        assert QApplication.font().pointSizeF() == size_before + 3
        assert table.font().pointSizeF() == size_before + 3, "the tables follow"
        assert table.columnWidth(COL_TYPE) > width_before, "columns widen with the font"
        assert table.verticalHeader().defaultSectionSize() > row_before, "rows grow with it"

        again = open_window(qtbot, test_db)  # the choice is kept
        assert again.font_size.step == 3
        qtbot.keyClick(window, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
        assert QApplication.font().pointSizeF() == size_before + 2
        window.font_size.reset_action.trigger()
        assert QApplication.font().pointSizeF() == size_before
        assert abs(table.columnWidth(COL_TYPE) - width_before) <= 3
        await close(again)
        await close(window)

    run_qasync(qapp, scenario())


def test_the_status_bar_counts_rows_and_keeps_messages_beside_its_labels(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    # Read now and then, the rows may be behind the list: an estimate, and the words say so.
    assert describe_size(TableSize(None, 2_000_000, 7)).startswith("jobs: ≈ 7 rows")
    assert describe_size(TableSize(None, 2_000_000, 100_001)).startswith("jobs: 100,000+ rows")
    assert describe_size(TableSize(None, 2_000_000, 7), listed=9) == "jobs: 9 rows · 2.0 MB"
    assert describe_size(None, listed=1) == "jobs: 1 row"
    # What the last retention run dropped: in the bar, and in full in its tooltip.
    at = datetime(2026, 12, 7, 3, 4, tzinfo=UTC)
    pruned = TableSize(10, 2_000_000, None, 6, LastPrune(at, 2, 400_000, {"failed": 3, "cancelled": 0}))
    assert describe_size(pruned) == f"jobs: ≈ 10 rows · 2.0 MB · pruned {at.astimezone():%H:%M}: 2 partitions"
    assert describe_retention(pruned) == (
        "6 partitions of completed jobs, dropped whole once past their retention\n"
        f"Last prune, {at.astimezone():%Y-%m-%d %H:%M}: dropped 2 partitions (≈ 400,000 completed jobs); "
        "deleted 3 failed")

    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'echo', '{}' FROM generate_series(1, 12)")
        window = open_window(qtbot, test_db, (1500, 900))
        await until(lambda: "rows" in window.table_size.text(), what="the table size")
        # A fresh table, not analysed yet: its rows are counted, not "not estimated".
        await until(lambda: window.table_size.text().startswith("jobs: 12 rows"), what="the count")
        # The bar's own reading (the words above are the list's count) comes in its own time.
        await until(lambda: window.table_size._size is not None, what="the bar's own reading")
        # Jobs arrive (as the demo's pipeline grows on the first screen of `make run`): the bar
        # says what the list's All chip says, not the count of its last read, 30 s ago.
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'echo', '{}' FROM generate_series(1, 4)")
        await until(lambda: window.jobs.status_buttons[None].text() == "All 16", what="the chips")
        assert window.table_size.text().startswith("jobs: 16 rows"), window.table_size.text()
        # A filtered list counts some jobs only: the bar's own reading, marked as an estimate.
        window.jobs.type_edit.setText("nothing.like.this")
        window.jobs.apply_filters()
        await until(lambda: window.jobs.status_buttons[None].text() == "All 0", what="the filtered chips")
        assert window.table_size.text().startswith("jobs: ≈ 12 rows"), window.table_size.text()
        window.statusBar().showMessage("notice: " + "a very long message about many failed jobs " * 10, 8000)
        await asyncio.sleep(0.1)
        message = window.statusBar().message  # type: ignore[attr-defined]
        assert message.isVisible() and message.text().endswith("…")
        assert message.geometry().right() < window.table_size.geometry().left(), "no overlap"
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_screenshot_names_cover_both_sizes() -> None:
    from jobdesk.console.screenshots import SIZES, name
    assert SIZES == [(1280, 900), (1920, 1080)]
    assert name("history", True, (1280, 900)) == "history-dark.png"
    assert name("history", False, (1920, 1080)) == "history-light-1920x1080.png"
    assert Path(name("metrics", False, (1920, 1080))).suffix == ".png"


def test_text_size_reaches_the_widgets_under_the_style_sheet(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                             test_db: str) -> None:
    """The console runs with a style sheet, which the application's font alone does not get past."""
    apply_style(qapp, dark=False)
    try:
        async def scenario() -> None:
            window = open_window(qtbot, test_db)
            await until(lambda: window.connection.is_connected, what="connection")
            table = window.jobs.table
            before, width_before = table.fontInfo().pointSizeF(), table.columnWidth(COL_TYPE)
            window.setFocus()
            qtbot.keyClick(window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
            qtbot.keyClick(window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
            await asyncio.sleep(0.1)
            assert table.fontInfo().pointSizeF() == pytest.approx(before + 2, abs=0.5)
            assert window.detail.error_view.fontInfo().pointSizeF() > before, "the monospace views too"
            assert table.columnWidth(COL_TYPE) > width_before
            apply_style(qapp, dark=True)  # the OS switches to dark: the size stays
            await asyncio.sleep(0.1)
            assert table.fontInfo().pointSizeF() == pytest.approx(before + 2, abs=0.5)
            window.font_size.reset_action.trigger()
            await close(window)

        run_qasync(qapp, scenario())
    finally:
        qapp.setProperty(TEXT_POINTS, None)
        qapp.setStyleSheet("")
        qapp.setPalette(qapp.style().standardPalette())
