"""The console's bulk actions and Failures tab, offscreen, against a real PostgreSQL: the dry
run and its confirmation, chunks with one audit row each, Stop, the grouping and Retry group."""

from __future__ import annotations

import asyncpg
from PySide6.QtWidgets import QApplication, QMessageBox

from jobdesk.console.failures.failure_model import COL_ATTEMPTS, COL_ERROR, COL_FAILED, COL_TYPES
from jobdesk.console.jobs.bulk_action import BulkActions
from jobdesk.core.models import Status
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_console import ids_shown, open_window, test_db  # noqa: F401

REFUSED = "ConnectionError: upstream <str> refused after <n> tries"


async def fill(conn: asyncpg.Connection, n: int, type: str, prefix: str) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, error_message, error_fingerprint) "
                       "SELECT $3 || lpad(g::text, 5, '0'), $2, '{}', 'failed', "
                       "'ConnectionError: upstream ''h' || g || ''' refused after ' || g || ' tries', $4 "
                       "FROM generate_series(1, $1) g", n, type, prefix, REFUSED)


async def answer_yes(bulk: BulkActions, expected: str) -> None:
    box = await until(lambda: bulk.confirm_box, timeout=5, what="the confirmation")
    assert expected in box.text(), box.text()
    box.button(QMessageBox.StandardButton.Yes).click()


def test_bulk_retry_by_filter_in_chunks_and_stop(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await fill(conn, 2500, "pdf", "p")
        await fill(conn, 3000, "mail", "m")
        window = open_window(qtbot, test_db)
        await until(lambda: window.connection.is_connected and window.bulk.writable, what="connection")
        window.jobs.status_buttons[None].setChecked(False)
        window.jobs.status_buttons[Status.FAILED].setChecked(True)
        window.jobs.type_edit.setText("pdf")
        window.jobs.apply_filters()
        await until(lambda: window.bulk.actions["retry"].text() == "Retry all 2,500 matching…",
                    what="the count in the action's label")
        assert window.bulk.actions["cancel"].text() == "Cancel all 0 matching…"

        window.bulk.actions["retry"].trigger()  # dry run, then the question
        await answer_yes(window.bulk, "Retry all 2,500 jobs matching status failed, type pdf?")
        run = await until(lambda: window.bulk.run, what="the run")
        await until(lambda: run.outcome, what="the run's end")
        assert run.outcome == "Done: retried 2,500 job(s), in 3 transaction(s)"
        assert run.panel.bar.value() == 2500 and run.panel.close_button.isEnabled()
        sizes = [r["n"] for r in await conn.fetch("SELECT cardinality(job_ids) AS n FROM audit_log "
                                                  "WHERE source = 'console' ORDER BY id")]
        assert sizes == [1000, 1000, 500]
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'pdf' AND status = 'queued'") == 2500

        # Stop ends the run after the chunk under way.
        window.jobs.type_edit.setText("mail")
        window.jobs.apply_filters()
        count = await window.bulk.confirm("retry", window.jobs.current_filter())
        assert count is not None and count.count == 3000
        box = window.bulk.confirm_box
        assert box is not None
        box.button(QMessageBox.StandardButton.No).click()
        assert window.bulk.run is run, "No starts nothing"
        stopping = window.bulk.start(count)
        stopping.panel.bar.valueChanged.connect(
            lambda v: stopping.panel.stop_button.click() if v >= 1000 else None)
        await until(lambda: stopping.outcome, what="the stopped run")
        assert stopping.outcome == "Stopped: retried 1,000 of 3,000 job(s)"
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'mail' AND status = 'queued'") == 1000
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=60)


def test_failures_grouped_shown_in_the_table_and_retried(qapp: QApplication, qtbot, qtmodeltester,  # type: ignore[no-untyped-def]
                                                         test_db: str) -> None:  # noqa: F811
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await fill(conn, 3, "pdf", "p")
        await conn.execute("INSERT INTO jobs (id, type, input_data, status, error_message, error_fingerprint) "
                           "VALUES ('k1', 'mail', '{}', 'failed', 'KeyError: ''x''', 'KeyError: <str>'), "
                           "('ok', 'mail', '{}', 'queued', NULL, NULL)")
        await conn.execute("INSERT INTO job_attempts (job_id, attempt, outcome, error_message, traceback, "
                           "error_fingerprint) VALUES ('p00003', 1, 'failed', 'ConnectionError: …', "
                           "'Traceback (most recent call last):\n  ConnectionError: upstream', $1)", REFUSED)
        window = open_window(qtbot, test_db)
        await until(lambda: window.connection.is_connected, what="connection")
        window.tabs.setCurrentWidget(window.failures)
        tab = window.failures
        await until(lambda: tab.model.rowCount() == 2, what="the groups")
        qtmodeltester.check(tab.model)
        cells = [tab.model.index(0, c).data() for c in (COL_ERROR, COL_FAILED, COL_ATTEMPTS, COL_TYPES)]
        assert cells == [REFUSED, "3", "1", "pdf"]
        assert tab.model.index(1, COL_ERROR).data() == "KeyError: <str>"

        tab.select_group(REFUSED)
        await until(lambda: "Traceback" in tab.traceback_view.toPlainText(), what="the sample traceback")
        assert "p00003" in tab.sample_label.text() or "00003" in tab.sample_label.text()
        await until(lambda: window.detail.job_id == "p00003", what="the sample in the detail pane")

        tab.show_button.click()
        assert window.tabs.currentWidget() is window.jobs
        await until(lambda: sorted(ids_shown(window)) == ["p00001", "p00002", "p00003"], what="the group's jobs")
        assert window.jobs.fingerprint_chip.isVisible()

        window.tabs.setCurrentWidget(tab)
        tab.retry_button.click()
        await answer_yes(window.bulk, f"Retry all 3 jobs matching status failed, error “{REFUSED}”?")
        await until(lambda: window.bulk.run and window.bulk.run.outcome, what="the group's retry")
        statuses = dict(await conn.fetch("SELECT id, status FROM jobs"))
        assert statuses == {"p00001": "queued", "p00002": "queued", "p00003": "queued", "k1": "failed",
                            "ok": "queued"}
        # Live: the group keeps its attempt of the last 24 hours, and no failed job is left in it.
        await until(lambda: tab.model.row_of(REFUSED) is not None
                    and tab.model.index(tab.model.row_of(REFUSED), COL_FAILED).data() == "0",
                    timeout=8, what="the groups after the retry")
        assert not tab.retry_button.isEnabled()
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=60)
