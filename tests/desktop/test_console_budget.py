"""What an open console reads while jobs change: bounded by what it shows, not by the rate of
changes. Against a real PostgreSQL, offscreen; the reads are counted at the service."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from PySide6.QtWidgets import QApplication

from jobdesk.console.connection import COALESCE_S
from jobdesk.console.failures.failures_tab import REFRESH_MS
from jobdesk.console.jobs.live_rows import MARGIN_ROWS
from jobdesk.console.main_window import MainWindow
from jobdesk.console.metrics.metrics_tab import PACE
from jobdesk.console.notify.notifier import READ_EVERY_S
from jobdesk.core.models import Status
from jobdesk.service.jobs import JobService
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_console import ids_shown, open_window

COUNTED = ("job_page", "job_rows", "job_progress", "status_counts", "transitions_since", "attention",
           "failure_groups", "failures_mark")


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


class Reads:
    """Counts the console's reads of the service, and the job rows they bring back."""

    def __init__(self, client: JobService) -> None:
        self.calls: Counter[str] = Counter()
        self.rows = 0
        for name in COUNTED:
            setattr(client, name, self._counting(name, getattr(client, name)))

    def _counting(self, name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = await method(*args, **kwargs)
            if name == "job_page":
                self.rows += len(result.rows)
            elif name == "job_rows":
                self.rows += len(result)
            return result
        return counted

    def reset(self) -> None:
        self.calls.clear()
        self.rows = 0

    def table_reads(self) -> int:
        return self.calls["job_page"] + self.calls["job_rows"]


async def seed(conn: asyncpg.Connection, n: int) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, created_at) "
                       "SELECT 'old-' || lpad(g::text, 5, '0'), 'echo', '{}', "
                       "now() - make_interval(secs => 100000 - g) "
                       "FROM generate_series(1, $1) g", n)


async def opened(qtbot, dsn: str) -> tuple[MainWindow, Reads]:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dsn)
    await until(lambda: window.connection.is_connected and window.connection.listening, what="connection")
    await until(lambda: window.model.rowCount() > 0, what="the first page")
    await asyncio.sleep(COALESCE_S + 0.3)  # the refresh after connecting has gone
    assert window.connection.client is not None
    return window, Reads(window.connection.client)


async def burst(conn: asyncpg.Connection, statements: int, per_statement: int, tag: str) -> None:
    """`statements` INSERTs, each its own NOTIFY of `per_statement` new jobs, as fast as they go."""
    for s in range(statements):
        await conn.execute("INSERT INTO jobs (id, type, input_data) SELECT $1 || '-' || g, 'echo', '{}' "
                           "FROM generate_series(1, $2) g", f"{tag}-{s}", per_statement)


def test_a_burst_of_changes_reads_the_rows_on_screen_once_per_interval(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                                        test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await seed(conn, 1000)
        window, reads = await opened(qtbot, test_db)
        table = window.jobs.table
        on_screen = table.viewport().height() // table.verticalHeader().defaultSectionSize() + 1
        # 3,000 new jobs and 1,000 changed ones, announced by 40 notifications in a burst.
        t0 = time.monotonic()
        await burst(conn, 30, 100, "new")
        for s in range(10):
            await conn.execute("UPDATE jobs SET status = 'cancelled', updated_at = now() WHERE id IN "
                               "(SELECT 'old-' || lpad(g::text, 5, '0') FROM generate_series($1::int, $2::int) g)",
                               s * 100 + 1, s * 100 + 100)
        sent_in = time.monotonic() - t0
        await until(lambda: ids_shown(window)[0].startswith("new-29-"), what="the newest job on top")
        await asyncio.sleep(2 * COALESCE_S)  # anything still pending has been read
        intervals = (time.monotonic() - t0) / COALESCE_S + 1
        # At most one read of the table per refresh interval, each of the rows on screen and a margin.
        assert reads.table_reads() <= intervals, (reads.calls, sent_in)
        assert reads.rows <= reads.table_reads() * (on_screen + MARGIN_ROWS + 1), (reads.rows, reads.calls)
        # The news (failures, approvals) is read once per its interval, not once per change.
        assert reads.calls["transitions_since"] <= (time.monotonic() - t0) / READ_EVERY_S + 1
        assert reads.calls["status_counts"] <= 2  # every 5 s at most (the Jobs tab, the Approvals title)
        assert window.model.rowCount() <= on_screen + MARGIN_ROWS + 1, "the table holds what it shows"
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=90)


def test_hidden_tabs_and_a_minimised_window_read_nothing(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                         test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await seed(conn, 50)
        window, reads = await opened(qtbot, test_db)

        window.tabs.setCurrentWidget(window.metrics)  # the Jobs tab hidden
        await burst(conn, 5, 10, "hidden")
        await asyncio.sleep(3 * COALESCE_S)
        assert reads.table_reads() == 0 and reads.calls["status_counts"] == 0, reads.calls
        window.tabs.setCurrentWidget(window.jobs)  # shown again: read at once
        await until(lambda: ids_shown(window)[0].startswith("hidden-4-"), timeout=2, what="the jobs added meanwhile")

        window.showMinimized()
        await until(lambda: window.isMinimized(), what="minimised")
        reads.reset()
        await burst(conn, 5, 10, "minimised")
        await asyncio.sleep(3 * COALESCE_S)
        assert reads.table_reads() == 0 and reads.calls["status_counts"] == 0, reads.calls
        window.showNormal()
        await until(lambda: ids_shown(window)[0].startswith("minimised-4-"), timeout=2, what="the jobs added meanwhile")
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=60)


def test_the_failures_tab_reads_its_groups_again_only_when_failures_change(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (type, input_data, status, error_message) "
                           "SELECT 'echo', '{}', 'failed', 'Boom ' || g FROM generate_series(1, 5) g")
        window, reads = await opened(qtbot, test_db)
        window.tabs.setCurrentWidget(window.failures)
        await until(lambda: window.failures.model.rowCount() == 5, what="the groups")
        await asyncio.sleep(0.2)
        reads.reset()
        # Jobs change, none fails: the mark is read, the groups are not.
        await burst(conn, 3, 10, "fine")
        await conn.execute("UPDATE jobs SET status = 'completed' WHERE id LIKE 'fine-%'")
        await until(lambda: reads.calls["failures_mark"] >= 1, timeout=REFRESH_MS / 1000 + 2, what="the mark")
        await asyncio.sleep(0.3)
        assert reads.calls["failure_groups"] == 0, reads.calls
        # A job fails: the groups are read again.
        await conn.execute("INSERT INTO jobs (type, input_data, status, error_message) "
                           "VALUES ('echo', '{}', 'failed', 'Crash')")
        await until(lambda: window.failures.model.rowCount() == 6, timeout=REFRESH_MS / 1000 + 3,
                    what="the new group")
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=60)


def test_a_row_inserted_by_plain_sql_shows_within_a_second_while_jobs_pour_in(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        writer = await asyncpg.connect(test_db)
        await seed(conn, 500)
        window, _reads = await opened(qtbot, test_db)
        stop = asyncio.Event()

        async def pour() -> None:  # 1,000 jobs/s inserted, and as many completed, by plain SQL
            tick = 0
            while not stop.is_set():
                await writer.execute("INSERT INTO jobs (id, type, input_data) SELECT $1 || g, 'echo', '{}' "
                                     "FROM generate_series(1, 100) g", f"flow-{tick}-")
                await writer.execute("UPDATE jobs SET status = 'completed', updated_at = now() WHERE id LIKE $1",
                                     f"flow-{tick - 5}-%")
                tick += 1
                await asyncio.sleep(0.1)

        # The operator watches one type: at 1,000 jobs/s, a job of any type stays on the first
        # screen of an unfiltered table for some 25 ms, so a change shows where the screen shows it.
        window.jobs.type_edit.setText("watched")
        window.jobs.apply_filters()
        await until(lambda: window.model.rowCount() == 0, what="the filtered table")
        pouring = asyncio.create_task(pour())
        await asyncio.sleep(1.0)
        for n in range(3):
            await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'watched', '{}')", f"watched-{n}")
            await until(lambda n=n: window.model.row_of(f"watched-{n}") is not None, timeout=1.0,
                        what="the inserted row in the table")
            await asyncio.sleep(0.37)
        await conn.execute("UPDATE jobs SET status = 'failed', updated_at = now() WHERE id = 'watched-1'")
        row = window.model.row_of("watched-1")
        await until(lambda: window.model.row_at(row).status == Status.FAILED, timeout=1.0,  # type: ignore[union-attr]
                    what="the changed row in the table")
        stop.set()
        await pouring
        await writer.close()
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=60)


def test_the_approvals_title_counts_only_the_waiting_jobs(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                         test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (type, input_data, status) SELECT 'echo', '{}', "
                           "(ARRAY['waiting_approval', 'failed', 'completed'])[1 + g % 3] "
                           "FROM generate_series(1, 30) g")
        window = open_window(qtbot, test_db)
        texts: list[str] = []
        window.approvals.title_changed.connect(texts.append)
        await until(lambda: texts, what="the Approvals title")
        assert texts[-1] == "Approvals (10)"
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=30)


def test_the_metrics_tab_waits_longer_after_a_slower_read(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                          test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await seed(conn, 5)
        await conn.close()
        window, _reads = await opened(qtbot, test_db)
        client = window.connection.client
        assert client is not None
        real = client.metrics

        async def slow(*args: Any, **kwargs: Any) -> Any:  # a read of a deep queue, 0.1 s
            await asyncio.sleep(0.1)
            return await real(*args, **kwargs)

        client.metrics = slow  # type: ignore[method-assign]
        window.tabs.setCurrentWidget(window.metrics)
        # A read of its own now (or right after the one in flight, which may have begun before
        # the slow reads): the tab's timer may have been set long by a read under load.
        window.metrics.refresh(changed=True)
        await until(lambda: window.metrics._timer.interval() >= 0.1 * PACE * 1000, timeout=20,
                    what="the paced refresh")
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=30)
