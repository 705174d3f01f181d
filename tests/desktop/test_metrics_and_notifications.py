"""The Metrics tab and the notifications, offscreen, against a real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from jobdesk.console.notify.notifier import Notice, NotificationSettings
from jobdesk.core.errors import SettingsError
from jobdesk.core.models import Status
from jobdesk.core.settings import load_settings
from jobdesk.store import rollup as stats_rollup
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def open_window(qtbot, dsn: str, settings: NotificationSettings) -> MainWindow:  # type: ignore[no-untyped-def]
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn), embedded=False)
    window = MainWindow(connection, notification_settings=settings)
    qtbot.addWidget(window)
    window.show()
    connection.start()
    return window


async def record(conn: asyncpg.Connection, job_type: str, n: int, *, wait_s: float | None, run_s: float | None,
                 completed: bool = False, failed: bool = False, at: float | None = None) -> None:
    """Add n attempts to the rollup, as the worker that ran them would."""
    rollup = stats_rollup.Rollup()
    for _ in range(n):
        rollup.attempt_ended(job_type, wait_s, run_s, completed=completed, failed=failed, at=at)
    await stats_rollup.write(conn, rollup.take())


def store(tmp_path: Path) -> QSettings:
    return QSettings(str(tmp_path / "jobdesk.ini"), QSettings.Format.IniFormat)


def test_metrics_tab_plots_the_database(qapp: QApplication, qtbot, test_db: str,  # type: ignore[no-untyped-def]
                                        tmp_path: Path) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        # 12 jobs that finished 10 minutes ago (run 0.5 s after a 2 s wait), 3 failed, 4 queued.
        await conn.execute("""
            INSERT INTO jobs (type, input_data, status, created_at, started_at, completed_at, updated_at)
            SELECT 'pdf.render', '{}', 'completed', now() - interval '10 minutes 2.5 seconds',
                   now() - interval '10 minutes 0.5 seconds', now() - interval '10 minutes', now()
              FROM generate_series(1, 12)""")
        await conn.execute("INSERT INTO jobs (type, input_data, status, updated_at) "
                           "SELECT 'mail', '{}', 'failed', now() FROM generate_series(1, 3)")
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'mail', '{}' FROM generate_series(1, 4)")
        await conn.execute("ANALYZE jobs")
        # What the workers that ran them added to the rollup.
        await record(conn, "pdf.render", 12, wait_s=2.0, run_s=0.5, completed=True, at=time.time() - 600)
        await record(conn, "mail", 3, wait_s=None, run_s=None, failed=True)
        await stats_rollup.sample_depth(conn)
        window = open_window(qtbot, test_db, NotificationSettings(store(tmp_path)))
        await until(lambda: window.connection.is_connected, what="connection")
        assert not window.metrics._timer.isActive(), "hidden: no reads"
        window.tabs.setCurrentWidget(window.metrics)
        await until(lambda: window.metrics.metrics is not None, what="the first read")
        assert window.metrics._timer.isActive()
        series = window.metrics.series()
        assert len(series["completed"]) == 61 and sum(series["completed"]) == 12
        assert sum(series["failed"]) == 3
        assert series["depth.queued"][-1] == 4 and series["depth.queued"][0] == 0
        assert series["depth.in_progress"][-1] == 0
        assert len(series["run.p50"]) == 1  # one type with attempts: pdf.render
        assert 0.35 < series["run.p50"][0] < 0.71 and 1.4 < series["wait.p50"][0] < 2.9
        assert "12 completed" in window.metrics.summary.text() and "4 queued" in window.metrics.summary.text()
        await until(lambda: "rows" in window.table_size.text(), what="the table size")
        # The jobs list shows every job: the bar says its count, as its All chip does.
        await until(lambda: window.table_size.text().startswith("jobs: 19 rows"), what="the list's count")

        # Live while shown: a new completion shows at the next read.
        window.metrics._timer.setInterval(200)
        window.metrics._timer.start()
        await record(conn, "pdf.render", 1, wait_s=0.0, run_s=0.0, completed=True)
        await until(lambda: sum(window.metrics.series()["completed"]) == 13, what="the live update")
        # The 7-day window reads the hourly rollup.
        window.metrics.window_combo.setCurrentText("Last 7 days")
        await until(lambda: window.metrics.metrics is not None and window.metrics.metrics.window.label == "7d")
        assert window.metrics.metrics.completed == 13  # type: ignore[union-attr]
        assert sum(window.metrics.series()["completed"]) * 60 == pytest.approx(13), "per minute, hourly points"
        window.tabs.setCurrentWidget(window.jobs)
        assert not window.metrics._timer.isActive(), "hidden again: reads stop"
        await conn.close()
        window.stop_timers()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_notifications_coalesce_open_mute_and_switch_off(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                         test_db: str, tmp_path: Path) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) "
                           "VALUES ('old-fail', 'pdf.render', '{}', 'failed')")
        settings = NotificationSettings(store(tmp_path))
        window = open_window(qtbot, test_db, settings)
        window.notifier.burst_s, window.notifier.gather_s = 0.6, 0.2
        notices: list[Notice] = []
        window.notifier.notice.connect(notices.append)
        presenter = window.attention
        assert not QSystemTrayIcon.isSystemTrayAvailable() and presenter.tray is None  # offscreen
        await until(lambda: window.notifier.baseline is not None, what="the notifier's start")
        await until(lambda: "1 failed in the last hour" in presenter.counts_label.text(), what="the counts")

        # A burst of failures makes one notification; the job that had failed before is not news.
        await conn.execute("INSERT INTO jobs (id, type, input_data) "
                           "SELECT 'r-' || g, 'pdf.render', '{}' FROM generate_series(1, 5) g")
        await conn.execute("UPDATE jobs SET status = 'failed', updated_at = now() WHERE id = 'r-1'")
        await conn.execute("UPDATE jobs SET status = 'failed', updated_at = now() WHERE id LIKE 'r-%'")
        await conn.execute("UPDATE jobs SET error_message = 'x' WHERE id = 'old-fail'")
        await until(lambda: notices, what="the notification")
        await asyncio.sleep(0.8)
        assert len(notices) == 1, notices
        assert notices[0].body == "5 jobs of pdf.render failed" and notices[0].job_id is None
        # Without a tray it is a status-bar message whose link opens the filter.
        assert "5 jobs of pdf.render failed" in presenter.notice_label.text() and presenter.notice_label.isVisible()
        await until(lambda: "6 failed in the last hour" in presenter.counts_label.text(), what="new counts")
        presenter.notice_label.linkActivated.emit("open")
        assert window.tabs.currentWidget() is window.jobs
        filt = window.jobs.current_filter()
        assert filt.statuses == frozenset({Status.FAILED}) and filt.type == "pdf.render"
        await until(lambda: window.model.rowCount() == 6, what="the filtered table")

        # One job waiting for approval: clicking opens that job.
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('ask-1', 'publish', '{}')")
        await conn.execute("UPDATE jobs SET status = 'waiting_approval', updated_at = now() WHERE id = 'ask-1'")
        await until(lambda: len(notices) == 2, what="the approval notification")
        assert notices[1].job_id == "ask-1" and "waits for approval" in notices[1].body
        presenter.notice_label.linkActivated.emit("open")
        await until(lambda: window.detail.job_id == "ask-1", what="the job opened")

        # Muted types are left out; so is everything once notifications are off.
        settings.set_muted("pdf.render", True)
        assert NotificationSettings(store(tmp_path)).muted == {"pdf.render"}, "remembered"
        await conn.execute("UPDATE jobs SET status = 'queued' WHERE id = 'r-2'")
        await conn.execute("UPDATE jobs SET status = 'failed', attempts = 2, updated_at = now() WHERE id = 'r-2'")
        await asyncio.sleep(1.2)
        assert len(notices) == 2
        presenter.set_enabled(False)
        assert not presenter.counts_label.isVisible() and not presenter.notice_label.isVisible()
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('m-1', 'mail', '{}', 'queued')")
        await conn.execute("UPDATE jobs SET status = 'failed', updated_at = now() WHERE id = 'm-1'")
        await asyncio.sleep(1.2)
        assert len(notices) == 2
        assert NotificationSettings(store(tmp_path)).enabled is False
        presenter.set_enabled(True)
        await conn.execute("UPDATE jobs SET status = 'queued' WHERE id = 'm-1'")
        await conn.execute("UPDATE jobs SET status = 'failed', attempts = 2, updated_at = now() WHERE id = 'm-1'")
        await until(lambda: len(notices) == 3, what="notifications on again")
        assert notices[2].body.endswith("of mail failed")
        await conn.close()
        window.stop_timers()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_the_environment_switch_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBDESK_NOTIFICATIONS", "false")
    settings = NotificationSettings(store(tmp_path), env_enabled=load_settings().JOBDESK_NOTIFICATIONS)
    settings.set_enabled(True)
    assert settings.enabled is False
    monkeypatch.setenv("JOBDESK_NOTIFICATIONS", "sometimes")
    with pytest.raises(SettingsError, match="JOBDESK_NOTIFICATIONS"):
        load_settings()
