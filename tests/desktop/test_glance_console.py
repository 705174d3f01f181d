"""Types and schedules at a glance in the console, against a real PostgreSQL and a real worker,
offscreen: the types view's utilisation gauge and 5-minute sparkline, and the Schedules tab's
description, recent runs coloured by status and Run now (audited; off on a read-only connection)."""

from __future__ import annotations

import asyncpg
import pytest
from PySide6.QtWidgets import QApplication

from jobdesk.console.schedules.schedule_model import COL_DESCRIPTION, COL_RECENT
from jobdesk.console.sparklines import GLANCE_ROLE, GaugeDelegate, RunsDelegate, SparklineDelegate
from jobdesk.console.workers import workers_panel
from jobdesk.console.workers.type_limits_view import COL_GAUGE, COL_SPARKLINE
from jobdesk.core.schedules import Schedule
from jobdesk.core.settings import load_settings
from jobdesk.processors.builtin import EchoProcessor
from jobdesk.service.jobs import JobService
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_workers_panel import close, open_window, test_db  # noqa: F401 - the fixture
from tests.flow_processors import Nap
from tests.helpers import RunningWorker, wait_for


@pytest.fixture(autouse=True)
def quick_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The panel reads the types at each poll."""
    monkeypatch.setattr(workers_panel, "UNSERVED_EVERY_S", 0.0)
    monkeypatch.setattr(workers_panel, "POLL_MS", 300)


def test_the_types_view_draws_a_gauge_and_a_sparkline(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'nap', '{\"seconds\": 0.01}' "
                           "FROM generate_series(1, 4)")
        worker = RunningWorker(test_db, {"nap": Nap()}, MAX_CONCURRENT_JOBS=4, JOB_TYPE_LIMITS="nap=2",
                               JOB_SHUTDOWN_TIMEOUT=0.2)  # the long naps only hold the slots: put back at the stop
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 4 FROM jobs WHERE status = 'completed'"),
                       what="the first naps")
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'nap', '{\"seconds\": 30}' "
                           "FROM generate_series(1, 3)")
        window = open_window(qtbot, test_db)
        window.workers.dock.show()  # open already by open_window; the panel reads only while shown
        view = window.workers.panel.types
        await until(lambda: view.select_type("nap"), what="the type in the types view")
        assert isinstance(view.table.itemDelegateForColumn(COL_GAUGE), GaugeDelegate)
        assert isinstance(view.table.itemDelegateForColumn(COL_SPARKLINE), SparklineDelegate)

        def nap() -> tuple[str, ...]:
            return next(r for r in view.rows() if r[0] == "nap")
        await until(lambda: nap()[COL_GAUGE] == "2 / 2 running", timeout=30, what="two naps running of 2")
        await until(lambda: nap()[COL_SPARKLINE] == "4 done, 0 failed in 5 min", timeout=30,
                    what="the finished naps, from the workers' rollup")
        row = [r.type for r in view.records].index("nap")
        assert view.table.item(row, COL_GAUGE).data(GLANCE_ROLE) == (2, 2)
        finished, failed = view.table.item(row, COL_SPARKLINE).data(GLANCE_ROLE)
        assert len(finished) == len(failed) == 60 and sum(finished) == 4
        assert "1 ready to run" in view.table.item(row, COL_GAUGE).toolTip()
        assert not view.table.grab().isNull()  # the delegates paint
        await worker.stop()
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_schedules_tab_describes_shows_recent_runs_and_runs_now(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    async def scenario() -> None:
        service = await JobService.connect(test_db, settings=load_settings(DATABASE_URL=test_db), pool_size=2)
        await service.add_schedule(Schedule(name="weekdays", type="echo", cron="0 9 * * 1-5"))
        before = (await service.schedules())[0].next_tick_at
        worker = RunningWorker(test_db, {"echo": EchoProcessor()})
        window = open_window(qtbot, test_db)
        tab = window.schedules
        window.tabs.setCurrentWidget(tab)
        await until(lambda: tab.model.rowCount() == 1 and tab.select("weekdays"), what="the schedule")
        assert tab.model.index(0, COL_DESCRIPTION).data() == "At 09:00, Monday through Friday"
        assert tab.model.index(0, COL_RECENT).data() == "no runs yet"
        assert isinstance(tab.table.itemDelegateForColumn(COL_RECENT), RunsDelegate)
        await until(lambda: tab.run_button.isEnabled(), what="Run now to be enabled")

        job_id = await tab.run_now()
        assert job_id is not None
        await until(lambda: tab.model.index(0, COL_RECENT).data() == "1 run: 1 completed", timeout=15,
                    what="the run, completed by the worker")
        [(status, duration)] = tab.model.index(0, COL_RECENT).data(GLANCE_ROLE)
        assert status == "completed" and duration is not None
        assert not tab.table.grab().isNull()  # the delegate paints
        [record] = await service.schedules()
        assert record.next_tick_at == before and record.recent[0].job_id == job_id
        assert await service.pool.fetchval("SELECT source FROM audit_log WHERE action = 'run-schedule'") == "console"

        # Gone meanwhile: one message, and nothing enqueued.
        messages: list[str] = []
        tab.message.connect(messages.append)
        await service.remove_schedule("weekdays")
        assert await tab.run_now() is None
        assert messages == ["cannot run schedule weekdays: no schedule named weekdays"]
        assert await service.pool.fetchval("SELECT count(*) FROM jobs") == 1
        await worker.stop()
        await service.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_run_now_is_off_on_a_read_only_connection(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    async def scenario() -> None:
        service = await JobService.connect(test_db, settings=load_settings(DATABASE_URL=test_db), pool_size=1)
        await service.add_schedule(Schedule(name="weekdays", type="echo", cron="0 9 * * 1-5"))
        window = open_window(qtbot, test_db, read_only=True)
        tab = window.schedules
        window.tabs.setCurrentWidget(tab)
        await until(lambda: tab.model.rowCount() == 1 and tab.select("weekdays"), what="the schedule")
        await until(lambda: tab.model.index(0, COL_DESCRIPTION).data() != "", what="the description")
        assert not tab.run_button.isEnabled()
        await service.close()
        await close(window)

    run_qasync(qapp, scenario())
