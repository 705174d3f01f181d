"""The Schedules tab against a real PostgreSQL and a real worker, offscreen."""

from __future__ import annotations

import asyncio

import pytest
from PySide6.QtWidgets import QApplication

from jobdesk.console.jobs.status_delegate import STATUS_ROLE, StatusChipDelegate
from jobdesk.core.models import Status
from jobdesk.core.schedules import Schedule
from jobdesk.core.settings import load_settings
from jobdesk.processors.builtin import EchoProcessor
from jobdesk.service.jobs import JobService
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_console import open_window
from tests.helpers import RunningWorker


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def test_schedules_tab_lists_shows_jobs_and_pauses(qapp: QApplication, qtbot, qtmodeltester,  # type: ignore[no-untyped-def]
                                                   test_db: str) -> None:
    async def scenario() -> None:
        service = await JobService.connect(test_db, settings=load_settings(DATABASE_URL=test_db), pool_size=2)
        await service.add_schedule(Schedule(name="heartbeat", type="echo", every_s=1, input_data={"beat": 1}))
        await service.add_schedule(Schedule(name="nightly-report", type="echo", cron="0 2 * * *",
                                            timezone="Europe/Berlin"))
        worker = RunningWorker(test_db, {"echo": EchoProcessor()})
        window = open_window(qtbot, test_db)
        tab = window.schedules
        window.tabs.setCurrentWidget(tab)
        await until(lambda: tab.model.rowCount() == 2, what="both schedules")
        qtmodeltester.check(tab.model)
        shown = [[tab.model.index(r, c).data() for c in range(4)] for r in range(2)]
        assert shown == [["heartbeat", "every 1s", "UTC", "echo"],
                         ["nightly-report", "0 2 * * *", "Europe/Berlin", "echo"]]
        assert tab.model.index(1, 6).data() == "▶ active" and "(in " in tab.model.index(1, 4).data()
        assert tab.select("heartbeat")
        await until(lambda: tab.ticks.rowCount() >= 2, timeout=8, what="the jobs the schedule made")
        qtmodeltester.check(tab.ticks)
        assert tab.ticks.index(0, 1).data() != "" and tab.ticks.index(0, 2).data() in ("queued", "in_progress",
                                                                                       "completed")
        # The status is a chip, as in the job table: the delegate reads the Status under STATUS_ROLE.
        assert tab.ticks.index(0, 2).data(STATUS_ROLE) == Status(tab.ticks.index(0, 2).data())
        assert isinstance(tab.tick_table.itemDelegateForColumn(2), StatusChipDelegate)

        assert tab.pause_button.isEnabled() and not tab.resume_button.isEnabled()
        assert await tab.set_paused(True)
        [record] = [r for r in await service.schedules() if r.schedule.name == "heartbeat"]
        assert record.paused
        await until(lambda: tab.model.index(0, 6).data() == "‖ paused", what="the paused state")
        assert tab.resume_button.isEnabled() and not tab.pause_button.isEnabled()
        made = len(await service.schedule_jobs("heartbeat"))
        await asyncio.sleep(1.5)
        assert len(await service.schedule_jobs("heartbeat")) == made, "no jobs while paused"
        assert await tab.set_paused(False)
        await until(lambda: tab.model.index(0, 6).data() == "▶ active", what="resumed")

        job_id = tab.ticks.index(0, 0).data(256)  # Qt.UserRole: the job id
        tab.job_activated.emit(job_id)
        await until(lambda: window.detail.job_id == job_id, what="the job opened from the schedule")
        await worker.stop()
        await service.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())
