"""The console against a real PostgreSQL, offscreen: live table, actions, detail panes, read-only."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from PySide6.QtWidgets import QApplication

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from jobdesk.core.models import Status
from jobdesk.core.settings import load_settings
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def open_window(qtbot, dsn: str, *, read_only: bool = False) -> MainWindow:  # type: ignore[no-untyped-def]
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn), embedded=False, read_only=read_only)
    window = MainWindow(connection)
    qtbot.addWidget(window)
    window.show()
    connection.start()
    return window


def ids_shown(window: MainWindow) -> list[str]:
    return [window.model.row_at(i).id for i in range(window.model.rowCount())]  # type: ignore[union-attr]


def test_live_table_actions_and_detail(qapp: QApplication, qtbot, qtmodeltester,  # type: ignore[no-untyped-def]
                                      test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('job-a', 'echo', '{\"n\": 1}'), "
                           "('job-b', 'email', '{\"to\": \"ops@example.com\"}')")
        await conn.execute("UPDATE jobs SET status = 'failed', error_message = 'SMTPError: 550\nTraceback: …' "
                           "WHERE id = 'job-b'")
        window = open_window(qtbot, test_db)
        await until(lambda: window.connection.is_connected, what="connection")
        await until(lambda: set(ids_shown(window)) == {"job-a", "job-b"}, what="the first rows")
        assert "jobdesk" in window.windowTitle() and "jdtest" in window.windowTitle()
        qtmodeltester.check(window.model)

        # A row inserted by plain SQL appears without any refresh, at the top.
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('job-c', 'echo', '{}')")
        await until(lambda: ids_shown(window)[:1] == ["job-c"], what="the pushed row")

        # Actions are enabled only where legal for every selected job.
        window.select_job("job-b")
        await until(lambda: window.job_actions.selection and window.job_actions.selection[0].id == "job-b")
        actions = window.job_actions.actions
        assert actions["retry"].isEnabled() and not actions["cancel"].isEnabled()
        assert not actions["approve"].isEnabled() and not actions["reject"].isEnabled()

        # The detail pane shows input and error.
        await until(lambda: window.detail.job_id == "job-b", what="the detail pane")
        assert "ops@example.com" in window.detail.input_view.raw.toPlainText()
        assert "SMTPError: 550" in window.detail.error_view.toPlainText()
        # Asked again for the job whose row is already selected, while the pane shows nothing
        # (as after a refresh moved the job onto the selected row): the pane loads it.
        window.detail.clear()
        window.select_job("job-b")
        await until(lambda: window.detail.job_id == "job-b", what="the detail pane, row already selected")
        # A change to the shown job while another one is being loaded (a DAG node was clicked)
        # leaves that load alone: the pane ends on the job asked for, not on the one it showed.
        window.tabs.setCurrentWidget(window.pipelines)
        window.pipelines.job_clicked.emit("job-a")
        window._changed({"job-b"})  # as a notification of a change to job-b before job-a's detail has loaded
        await until(lambda: window._detail_loading is None, what="the detail loaded")
        assert window.detail.job_id == "job-a"
        window.tabs.setCurrentWidget(window.jobs)
        window.select_job("job-b")
        await until(lambda: window.detail.job_id == "job-b", what="the detail pane, back on job-b")

        # Retry changes the database and the row within a second.
        await window.job_actions.perform("retry", ["job-b"])
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'job-b'") == "queued"
        row = window.model.row_of("job-b")
        await until(lambda: window.model.row_at(row).status == Status.QUEUED, timeout=1.0, what="the row update")
        assert await conn.fetchval("SELECT source FROM audit_log WHERE action = 'retry'") == "console"

        # A refused action is a message, not a crash, and changes nothing.
        errors: list[str] = []
        window.job_actions.error.connect(errors.append)
        await window.job_actions.perform("approve", ["job-a"])
        assert errors and "cannot approve job job-a" in errors[0]
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'job-a'") == "queued"

        # Filters run on the server.
        window.jobs.status_buttons[None].setChecked(False)
        window.jobs.status_buttons[Status.QUEUED].setChecked(True)
        window.jobs.type_edit.setText("email")
        window.jobs.apply_filters()
        await until(lambda: ids_shown(window) == ["job-b"], what="the filtered rows")
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_read_only_mode_disables_actions(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('f', 'echo', '{}', 'failed')")
        window = open_window(qtbot, test_db, read_only=True)
        await until(lambda: ids_shown(window) == ["f"], what="rows")
        window.select_job("f")
        await until(lambda: window.job_actions.selection)
        reason = "Read-only: opened read-only (--read-only, or the connection's profile)"
        assert all(a.isVisible() and not a.isEnabled() and a.toolTip() == reason
                   for a in window.job_actions.actions.values())
        assert "read-only" in window.windowTitle()
        assert window.status_bar.read_only.isVisible()
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_reconnects_after_the_database_restarts(qapp: QApplication, qtbot, test_db: str,  # type: ignore[no-untyped-def]
                                                pg_server) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('before', 'echo', '{}', 'failed')")
        await conn.close()
        window = open_window(qtbot, test_db)
        await until(lambda: ids_shown(window) == ["before"], what="rows")
        window.select_job("before")
        await until(lambda: window.job_actions.actions["retry"].isEnabled(), what="retry enabled")
        pg_server.stop()
        await until(lambda: window.banner.property("kind") == "disconnected", timeout=10, what="the banner")
        assert "disconnected, retrying" in window.banner.text()
        assert not window.job_actions.actions["retry"].isEnabled(), "actions are off while disconnected"
        pg_server.ensure_running()
        await until(lambda: window.banner.property("kind") == "connected", timeout=20, what="reconnection")
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('after', 'echo', '{}')")
        await conn.close()
        await until(lambda: "after" in ids_shown(window), timeout=5, what="live updates to resume")
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_worker_progress_and_every_action_show_in_the_table(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                            test_db: str) -> None:
    from jobdesk.core.models import JobCreate
    from jobdesk.processors.builtin import EchoProcessor
    from jobdesk.runtime.worker import Worker
    from jobdesk.store.transitions import enqueue

    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        for job_id, status in (("wait-1", "waiting_approval"), ("wait-2", "waiting_approval"),
                               ("idle", "queued")):
            await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ($1, 'never.served', "
                               "'{}', $2)", job_id, status)
        window = open_window(qtbot, test_db)
        await until(lambda: len(ids_shown(window)) == 3, what="rows")

        def status_of(job_id: str) -> Status | None:
            row = window.model.row_of(job_id)
            return None if row is None else window.model.row_at(row).status  # type: ignore[union-attr]

        # A worker completing a job changes its row, and the detail pane shows its result.
        from jobdesk.store.db import connect
        c = await connect(test_db)
        await enqueue(c, [JobCreate("echo", {"say": "hi"}, id="echoed")])
        await c.close()
        worker = Worker(load_settings(DATABASE_URL=test_db), test_db, {"echo": EchoProcessor()})
        task = asyncio.create_task(worker.run())
        await until(lambda: status_of("echoed") == Status.COMPLETED, what="the worker's result in the table")
        worker.request_stop()
        await task
        window.select_job("echoed")
        await until(lambda: window.detail.job_id == "echoed", what="detail")
        assert '"say": "hi"' in window.detail.result_view.raw.toPlainText()

        await window.job_actions.perform("approve", ["wait-1"])
        await until(lambda: status_of("wait-1") == Status.COMPLETED, timeout=1, what="approve in the table")
        await window.job_actions.perform("reject", ["wait-2"], "wrong colours")
        await until(lambda: status_of("wait-2") == Status.FAILED, timeout=1, what="reject in the table")
        await window.job_actions.perform("cancel", ["idle"])
        await until(lambda: status_of("idle") == Status.CANCELLED, timeout=1, what="cancel in the table")
        rows = await conn.fetch("SELECT id, status, error_message FROM jobs WHERE id IN ('wait-1', 'wait-2', 'idle')")
        assert {r["id"]: r["status"] for r in rows} == {"wait-1": "completed", "wait-2": "failed",
                                                        "idle": "cancelled"}
        assert await conn.fetchval("SELECT count(*) FROM audit_log WHERE source = 'console'") == 3

        # The history tab lists failed attempts.
        await conn.execute("INSERT INTO job_attempts (job_id, attempt, outcome, error_message) "
                           "VALUES ('wait-2', 1, 'failed', 'TimeoutError: upstream slow')")
        window.select_job("wait-2")
        await until(lambda: window.detail.job_id == "wait-2" and window.detail.history.rowCount() == 1,
                    what="history")
        assert window.detail.history.item(0, 4).text() == "TimeoutError: upstream slow"
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_switching_to_a_production_profile(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    from jobdesk.console.app import Console, parse_args
    from jobdesk.console.connection_dialog import Profile

    async def scenario() -> None:
        console = Console(parse_args([]))
        console.open(test_db, embedded=False, production=False, read_only=False)
        first = console.window
        assert first is not None
        await until(lambda: first.banner.property("kind") == "connected", what="first connection")
        console.switch(Profile("prod", test_db, production=True, read_only=True), test_db)
        second = console.window
        assert second is not None and second is not first and not first.isVisible()
        await until(lambda: second.banner.property("kind") == "production", what="the production banner")
        assert second.banner.text().startswith("PRODUCTION")
        await until(lambda: "read-only" in second.windowTitle(), what="read-only from the profile")
        second.close()
        await second.connection.close()

    run_qasync(qapp, scenario())


def test_a_role_without_write_rights_is_read_only(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    from urllib.parse import urlsplit, urlunsplit

    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'jd_viewer') "
                           "THEN CREATE ROLE jd_viewer LOGIN; END IF; END $$")
        await conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO jd_viewer")
        await conn.execute("INSERT INTO jobs (id, type, input_data, status) VALUES ('f', 'echo', '{}', 'failed')")
        await conn.close()
        parts = urlsplit(test_db)
        viewer = urlunsplit(parts._replace(netloc="jd_viewer@" + parts.netloc.rsplit("@", 1)[-1]))
        window = open_window(qtbot, viewer)
        await until(lambda: ids_shown(window) == ["f"], what="rows for the viewer")
        await until(lambda: "read-only" in window.windowTitle(), what="read-only")
        window.select_job("f")
        await until(lambda: window.job_actions.selection)
        assert not window.job_actions.actions["retry"].isEnabled()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_rows_move_when_their_sort_key_changes(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        for job_id in ("one", "two", "three"):
            await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'echo', '{}')", job_id)
        window = open_window(qtbot, test_db)
        await until(lambda: window.connection.is_connected, what="connection")
        window.model.set_query(window.model.filter, "updated", True)
        await until(lambda: ids_shown(window) == ["three", "two", "one"], what="newest update first")
        await conn.execute("UPDATE jobs SET status = 'cancelled', updated_at = now() + interval '1 s' "
                           "WHERE id = 'one'")
        await until(lambda: ids_shown(window) == ["one", "three", "two"], what="the updated row to move up")
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())
