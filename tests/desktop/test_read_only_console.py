"""The console on a viewer's connection (`jobdesk grant viewer ROLE`, connecting as that role):
"read-only" in the status bar, and every action in sight but disabled, its tooltip saying why:
the toolbar, the context menus, the tabs' buttons, type pause, bulk actions, approvals, schedules
and worker control."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QAbstractButton, QApplication

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.jobs.job_actions import ACTIONS
from jobdesk.console.main_window import MainWindow
from jobdesk.core.schedules import Schedule
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_workers_panel import add_worker_row


@pytest.fixture
def viewer_db(template: str, pg_server) -> Iterator[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """A test database with a LOGIN role granted `viewer` on it: (the admin's URL, the viewer's)."""
    dsn = asyncio.run(pg.create_test_database(template))
    role = f"jd_console_viewer_{os.getpid()}"

    async def setup() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f"DROP ROLE IF EXISTS {role}")
            await conn.execute(f"CREATE ROLE {role} LOGIN")
        finally:
            await conn.close()
        async with await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=1) as admin:
            await admin.grant_role("viewer", role)
            await admin.add_schedule(Schedule("nightly", "mail", cron="0 2 * * *"))

    asyncio.run(setup())
    parts = urlsplit(dsn)
    yield dsn, urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))
    asyncio.run(pg.drop_test_database(dsn))

    async def drop() -> None:
        conn = await asyncpg.connect(pg.with_database(dsn, "postgres"))
        try:
            await conn.execute(f"DROP ROLE IF EXISTS {role}")
        finally:
            await conn.close()

    asyncio.run(drop())


def off_saying_why(target: QAction | QAbstractButton, tip: str) -> bool:
    return not target.isEnabled() and target.toolTip() == tip


def test_a_viewer_sees_every_action_off_and_why(qapp: QApplication, qtbot, viewer_db: tuple[str, str]) -> None:  # type: ignore[no-untyped-def]
    admin_dsn, viewer_dsn = viewer_db
    role = urlsplit(viewer_dsn).username
    tip = f"Read-only: role {role} cannot change jobs"

    async def scenario() -> None:
        conn = await asyncpg.connect(admin_dsn)
        await conn.execute("INSERT INTO jobs (id, type, input_data, status, pipeline_id, error_message) VALUES "
                           "('f', 'mail', '{}', 'failed', 'p-1', 'SMTPError: 550'), "
                           "('w', 'mail', '{}', 'waiting_approval', 'p-1', NULL), "
                           "('q', 'mail', '{}', 'queued', 'p-1', NULL)")
        await add_worker_row(conn, "remote-1", ["mail"])
        connection = ConsoleConnection(viewer_dsn, load_settings(DATABASE_URL=viewer_dsn, JOB_LEASE_TIMEOUT=60),
                                       embedded=False)
        window = MainWindow(connection)
        qtbot.addWidget(window)
        window.show()
        connection.start()
        sign = window.status_bar.read_only
        await until(lambda: sign.isVisible(), what="the read-only sign in the status bar")
        assert sign.text() == "read-only" and sign.toolTip().startswith(tip)

        # The toolbar: New job, the selected jobs' actions (and so their shortcuts), All matching.
        await until(lambda: window.jobs.select_job("f"), what="the job in the table")
        await until(lambda: [r.id for r in window.job_actions.selection] == ["f"], what="the selection")
        assert all(a.isVisible() and off_saying_why(a, tip) for a in window.job_actions.actions.values())
        assert off_saying_why(window.new_job_action, tip)
        assert off_saying_why(window.toolbar.bulk_button, tip) and window.toolbar.bulk_tool_action.isVisible()
        assert all(off_saying_why(a, tip) for a in window.bulk.actions.values())
        # The job table's context menu shares those actions, with their tooltips shown.
        menu = window.share.job_menu(["f"])
        assert menu.toolTipsVisible()
        by_text = {a.text(): a for a in menu.actions()}
        assert all(off_saying_why(by_text[label], tip) for label, _key, _q in ACTIONS.values())
        # The Approvals tab's buttons.
        for button in (window.approvals.approve_button, window.approvals.reject_button):
            assert off_saying_why(button, tip)

        # The Failures tab's Retry group.
        window.tabs.setCurrentWidget(window.failures)
        await until(lambda: window.failures.select_group("SMTPError: 550"), what="the failure group")
        assert window.failures.retry_button.isVisible() and off_saying_why(window.failures.retry_button, tip)

        # The Pipelines tab: Cancel pipeline, and the node's and the list's context menus.
        window.show_pipeline_graph("p-1")
        pipelines = window.pipelines
        await until(lambda: pipelines.node("w") is not None, what="the pipeline's graph")
        assert pipelines.cancel_pipeline_action.isVisible() and off_saying_why(pipelines.cancel_pipeline_action, tip)
        node_menu = pipelines.node_menu("w")
        acting = [a for a in node_menu.actions() if a.text() in {*(label for label, _k, _q in ACTIONS.values()),
                                                                 "Retry failed and downstream…", "Cancel pipeline…"}]
        assert len(acting) == len(ACTIONS) + 2 and all(off_saying_why(a, tip) for a in acting)
        list_menu = {a.text(): a for a in pipelines.pipeline_menu("p-1").actions()}
        assert off_saying_why(list_menu["Retry failed and downstream…"], tip)
        assert off_saying_why(list_menu["Cancel pipeline…"], tip)

        # The Schedules tab.
        window.tabs.setCurrentWidget(window.schedules)
        await until(lambda: window.schedules.select("nightly"), what="the schedule")
        assert off_saying_why(window.schedules.pause_button, tip)

        # Worker control and type pause in the Workers dock; Launch worker.
        panel = window.workers.panel
        await until(lambda: panel.select_worker("remote-1"), what="the worker row")
        assert all(off_saying_why(b, tip) for b in panel.command_buttons.values())
        assert off_saying_why(window.workers.launch_action, tip)
        panel.types.all_types.setChecked(True)  # not only the paused or limited types
        await until(lambda: panel.types.select_type("mail"), what="the type")
        assert all(off_saying_why(b, tip) for b in panel.types.buttons.values())

        # Triggered anyway (a shortcut, a stale menu), nothing happens.
        window.tabs.setCurrentWidget(window.jobs)
        window.select_job("f")
        window.job_actions.trigger("retry", window.job_actions.selection)
        window.bulk.ask("retry")
        await asyncio.sleep(0.3)
        assert window.bulk.confirm_box is None
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'f'") == "failed"
        assert await conn.fetchval("SELECT count(*) FROM audit_log WHERE action <> 'add-schedule'") == 0
        await conn.close()
        window.close()
        await connection.close()

    run_qasync(qapp, scenario())
