"""The Workers panel against a real PostgreSQL, offscreen: workers launched from the console,
commands through the control channel, lost workers, unserved job types, the worker log."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import asyncpg
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from jobdesk.console.workers import workers_panel
from jobdesk.console.workers.launched_worker import LaunchedWorker, WorkerLauncher
from jobdesk.console.workers.log_dock import WorkerLogDock
from jobdesk.console.workers.worker_table_model import COL_HOST, COL_JOBS, COL_STATE
from jobdesk.console.workers.workers_panel import WorkersPanel
from jobdesk.core.models import short_id
from jobdesk.core.settings import load_settings
from jobdesk.processors.builtin import EchoProcessor, SleepProcessor
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until
from tests.helpers import RunningWorker, start_worker, wait_for

# Launched workers heartbeat often and stop quickly, so that the tests stay short.
FAST = {"JOB_HEARTBEAT_INTERVAL": "0.2", "JOB_LEASE_TIMEOUT": "1.5", "JOB_SHUTDOWN_TIMEOUT": "1",
        "JOB_PROCESSOR_POLL_INTERVAL": "0.05"}


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


@pytest.fixture(autouse=True)
def fast_workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[LaunchedWorker]]:
    """Short heartbeats and leases for launched workers; no launched process outlives its test."""
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(workers_panel, "POLL_MS", 300)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    started: list[LaunchedWorker] = []
    original = LaunchedWorker.start

    def start(self: LaunchedWorker) -> None:
        started.append(self)
        original(self)

    monkeypatch.setattr(LaunchedWorker, "start", start)
    yield started
    for worker in started:
        if worker.left_running and worker.pid:
            try:
                os.kill(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            worker.kill()


def open_window(qtbot, dsn: str, *, read_only: bool = False, embedded: bool = False,  # type: ignore[no-untyped-def]
                **settings: object) -> MainWindow:
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn, **settings), embedded=embedded,
                                   read_only=read_only)
    window = MainWindow(connection)
    qtbot.addWidget(window)
    window.show()
    window.workers.dock.show()  # the panel reads only while it is on screen
    connection.start()
    return window


async def close(window: MainWindow) -> None:
    window.workers.stop_on_close = True
    window.close()
    await until(lambda: not window.isVisible(), timeout=15, what="the window to close")
    await window.shutdown()


def shown(panel: WorkersPanel, worker_id: str, col: int) -> str:
    row = panel.model.row_of(worker_id)
    return "" if row is None else panel.model.data(panel.model.index(row, col))


async def add_worker_row(conn: asyncpg.Connection, worker_id: str, types: list[str], state: str = "running") -> None:
    await conn.execute("INSERT INTO workers (id, host, pid, concurrency, job_types, version, state) "
                       "VALUES ($1, 'elsewhere', 4242, 4, $2, '0.1.0', $3)", worker_id, types, state)


def test_a_worker_launched_from_the_panel_runs_a_queued_job_and_shows_in_the_panel(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, qtmodeltester, test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('hello', 'echo', '{\"say\": \"hi\"}')")
        window = open_window(qtbot, test_db)
        workers, panel = window.workers, window.workers.panel
        await until(lambda: workers.launch_action.isEnabled(), what="Launch worker to be enabled")
        await until(lambda: panel.warnings(), what="the unserved-type warning")
        assert panel.warnings() == ["⚠ no worker serves type echo — 1 queued job waits"]
        assert workers.launcher.workers == [], "no worker starts by itself on a database given by URL"

        workers.launch_action.trigger()
        launched = workers.launcher.workers[0]
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = 'hello'"),
                       what="the launched worker to complete the job")
        record = await until(lambda: next((w for w in panel.model.workers()
                                           if w.pid == launched.pid and w.state == "running"), None),
                             what="the launched worker in the panel")
        assert shown(panel, record.id, COL_STATE) == "▶ running"
        assert shown(panel, record.id, COL_HOST).endswith("(this console)")
        await until(lambda: not panel.warnings(), what="the warning to go once a worker serves echo")
        qtmodeltester.check(panel.model)

        # Its log streams into the dock.
        dock = workers.log_dock
        assert dock.isVisible() and dock.current() is launched
        await until(lambda: any("ready" in line for line in dock.shown_lines()), what="the worker's log")
        assert dock.stop_button.isEnabled() and dock.restart_button.isEnabled()

        # Restart: a new process, and a new row in the panel.
        first_pid = launched.pid
        dock.restart_button.click()
        await until(lambda: launched.pid not in (None, first_pid) and launched.is_running, timeout=15,
                    what="the restarted worker")
        await until(lambda: any(w.pid == launched.pid and w.state == "running" for w in panel.model.workers()),
                    what="the restarted worker in the panel")
        assert shown(panel, record.id, COL_STATE) == "■ stopped"

        # Closing the window asks about the launched worker; "yes" stops it gracefully, then closes.
        workers.stop_on_close = True
        window.close()
        assert window.isVisible(), "the window waits for its workers"
        await until(lambda: not window.isVisible(), timeout=15, what="the window to close")
        assert not launched.is_running and launched.exit_note == "exited (code 0)"
        assert set(await conn.fetch("SELECT state FROM workers")) == {("stopped",)}
        await window.shutdown()
        await conn.close()

    run_qasync(qapp, scenario())


def test_pause_and_resume_through_the_panel(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        runner = RunningWorker(test_db, {"echo": EchoProcessor(), "sleep": SleepProcessor()},
                               JOB_HEARTBEAT_INTERVAL=0.2)
        worker_id = runner.worker.worker_id
        window = open_window(qtbot, test_db)
        panel = window.workers.panel
        await until(lambda: panel.select_worker(worker_id), what="the worker in the panel")
        buttons = panel.command_buttons
        await until(lambda: buttons["pause"].isEnabled(), what="Pause to be enabled")
        assert not buttons["resume"].isEnabled()

        # The jobs in flight are links to the job.
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('nap', 'sleep', '{\"seconds\": 30}')")
        await until(lambda: shown(panel, worker_id, COL_JOBS) == "1: nap", what="the job in flight")
        index = panel.model.index(panel.model.row_of(worker_id) or 0, COL_JOBS)
        cell = panel.table.visualRect(index)
        metrics = panel.table.fontMetrics()
        x = cell.x() + 4 + metrics.horizontalAdvance("1: ") + metrics.horizontalAdvance(short_id("nap")) // 2
        QTest.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, cell.center().y()))
        await until(lambda: window.detail.job_id == "nap", what="the link to open the job")
        await window.job_actions.perform("cancel", ["nap"])
        await wait_for(lambda: conn.fetchval("SELECT status <> 'in_progress' FROM jobs WHERE id = 'nap'"),
                       what="the sleeping job to end")

        buttons["pause"].click()
        await wait_for(lambda: conn.fetchval("SELECT state = 'paused' FROM workers WHERE id = $1", worker_id),
                       what="the worker to pause")
        await until(lambda: shown(panel, worker_id, COL_STATE) == "‖ paused", what="paused in the panel")
        await until(lambda: buttons["resume"].isEnabled(), what="Resume to be enabled")
        assert not buttons["pause"].isEnabled()
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('later', 'echo', '{}')")
        await asyncio.sleep(0.8)
        assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'later'") == "queued", "paused: no claims"

        buttons["resume"].click()
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = 'later'"),
                       what="claims to restart after resume")
        await until(lambda: shown(panel, worker_id, COL_STATE) == "▶ running", what="running in the panel")

        # A refused command is a clear message, not a traceback.
        await runner.stop()
        assert not await panel.send("stop", worker_id)
        assert panel.error_label.isVisibleTo(panel)
        assert panel.error_label.text() == (f"⚠ cannot stop worker {worker_id}: it is stopped; "
                                            "stop applies to draining, paused, running workers")
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_a_worker_killed_with_sigkill_is_shown_as_lost(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        proc = start_worker(test_db, log_path=None, **FAST)
        try:
            window = open_window(qtbot, test_db)
            panel = window.workers.panel
            record = await until(lambda: next((w for w in panel.model.workers()
                                               if w.pid == proc.pid and w.state == "running"), None),
                                 timeout=20, what="the worker in the panel")
            assert not panel.model.is_lost(record)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            await until(lambda: shown(panel, record.id, COL_STATE) == "⚠ lost?", timeout=10,
                        what="the killed worker shown as lost")
            index = panel.model.index(panel.model.row_of(record.id) or 0, COL_STATE)
            assert index.data(Qt.ItemDataRole.FontRole).bold(), "lost rows stand out, not by colour alone"
            assert "presumed lost" in index.data(Qt.ItemDataRole.ToolTipRole)
            await until(lambda: "⚠ 1 lost" in panel.summary.text(), what="the lost worker counted")
            panel.select_worker(record.id)
            assert not any(b.isEnabled() for b in panel.command_buttons.values()), "a lost worker takes no command"
            await close(window)
        finally:
            proc.kill()
            proc.wait(10)

    run_qasync(qapp, scenario())


def test_read_only_turns_worker_commands_and_launching_off(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                           test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await add_worker_row(conn, "remote-1", ["echo"])
        await conn.close()
        window = open_window(qtbot, test_db, read_only=True, embedded=True, JOB_LEASE_TIMEOUT=60)
        panel = window.workers.panel
        await until(lambda: panel.select_worker("remote-1"), what="the worker row")
        await until(lambda: "read-only" in window.windowTitle(), what="read-only")
        await asyncio.sleep(0.3)
        assert not any(b.isEnabled() for b in panel.command_buttons.values())
        assert panel.command_buttons["pause"].toolTip().startswith("Read-only")
        assert not window.workers.launch_action.isEnabled()
        assert window.workers.launcher.workers == [], "a read-only console starts no worker"
        await close(window)

    run_qasync(qapp, scenario())


def test_unserved_job_types_are_flagged(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (type, input_data) VALUES ('render', '{}'), ('render', '{}'), "
                           "('echo', '{}'), ('email.send', '{}')")
        await add_worker_row(conn, "serves-echo", ["echo"])
        await add_worker_row(conn, "gone", ["email.send"], state="stopped")
        window = open_window(qtbot, test_db, JOB_LEASE_TIMEOUT=60)  # rows without heartbeats stay live
        panel = window.workers.panel
        await until(lambda: panel.warnings(), what="warnings")
        assert panel.warnings() == ["⚠ no worker serves type render — 2 queued jobs wait",
                                    "⚠ no worker serves type email.send — 1 queued job waits"]
        # A worker that serves render comes up: its warning goes at the next fetch.
        await add_worker_row(conn, "serves-render", ["render"])
        await until(lambda: len(panel.warnings()) == 1, timeout=5, what="the render warning to go")
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())


def test_on_the_embedded_default_a_worker_starts_by_itself_unless_turned_off(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    async def scenario() -> None:
        off = open_window(qtbot, test_db, embedded=True, JOBDESK_AUTOSTART_WORKER=False)
        await until(lambda: off.workers._autostart_checked, what="the first fetch")
        assert off.workers.launcher.workers == []
        await close(off)

        window = open_window(qtbot, test_db, embedded=True)
        panel = window.workers.panel
        started = await until(lambda: window.workers.autostarted, what="a worker to start by itself")
        await until(lambda: any(w.pid == started.pid and w.state == "running" for w in panel.model.workers()),
                    timeout=20, what="the started worker in the panel")
        assert len(window.workers.launcher.workers) == 1
        # "No" on quit leaves it running without the console.
        window.workers.stop_on_close = False
        window.close()
        assert not window.isVisible() and started.left_running
        await window.shutdown()
        await asyncio.sleep(0.2)  # the forgotten QProcess is deleted meanwhile
        os.kill(started.pid, 0)  # still there
        conn = await asyncpg.connect(test_db)
        await wait_for(lambda: conn.fetchval("SELECT state = 'running' FROM workers WHERE pid = $1 AND "
                                             "heartbeat_at > now() - interval '1 second'", started.pid),
                       what="the worker left running to keep heartbeating")
        await conn.close()

    run_qasync(qapp, scenario())


def test_the_log_dock_filters_by_level_and_text_while_lines_keep_coming(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    connection = ConsoleConnection(test_db, load_settings(DATABASE_URL=test_db), embedded=False)
    launcher = WorkerLauncher(connection)
    dock = WorkerLogDock(launcher)
    qtbot.addWidget(dock)
    assert dock.shown_lines() == [] and not dock.stop_button.isEnabled()
    worker = LaunchedWorker(1, ["jobdesk", "worker"], {}, stop_timeout_s=1)
    launcher.workers.append(worker)
    launcher.added.emit(worker)
    worker.receive("2026-05-01 10:00:00,001 INFO    jobdesk.worker: worker w-1 ready: 10 slot(s)\n"
                   "2026-05-01 10:00:00,002 DEBUG   asyncpg.pool: new connection\n"
                   "2026-05-01 10:00:01,003 WARNING jobdesk.worker: job a1 taken back\n"
                   "2026-05-01 10:00:02,004 ERROR   jobdesk.worker: processor crashed on job b2\n"
                   "Traceback (most recent call last):\n"
                   "  ValueError: boom\n"
                   "2026-05-01 10:00:03,005 INFO    jobdesk.wor")  # a partial line waits for its end
    assert len(dock.shown_lines()) == 6

    dock.set_filter(level="WARNING")
    assert dock.shown_lines() == ["2026-05-01 10:00:01,003 WARNING jobdesk.worker: job a1 taken back",
                                  "2026-05-01 10:00:02,004 ERROR   jobdesk.worker: processor crashed on job b2",
                                  "Traceback (most recent call last):", "  ValueError: boom"]
    worker.receive("ker: claimed 3 job(s)\n2026-05-01 10:00:04,006 ERROR   jobdesk.worker: database went away\n")
    assert dock.shown_lines()[-1].endswith("database went away"), "new lines stream in while filtered"
    assert not any("claimed" in line for line in dock.shown_lines())

    dock.set_filter(search="JOB B2")
    assert dock.shown_lines() == ["2026-05-01 10:00:02,004 ERROR   jobdesk.worker: processor crashed on job b2"]
    dock.set_filter(level="DEBUG", search="")
    assert len(dock.shown_lines()) == 8 and dock.shown_lines()[6].endswith("claimed 3 job(s)")
    assert dock.highlighter.document() is dock.view.document()


def test_the_limits_table_shows_each_limit_its_use_and_what_it_holds_back(  # type: ignore[no-untyped-def]
        qapp: QApplication, qtbot, test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO users (id, name) VALUES (42, 'u42')")
        await conn.execute("INSERT INTO flow_limits (type, user_max_running) VALUES ('video.render', 1)")
        await conn.execute("INSERT INTO flow_limits (type, rate_max, rate_period, starts) "
                           "VALUES ('image.generate', 2, '1 hour', ARRAY[now(), now()])")
        await conn.execute("INSERT INTO jobs (type, input_data, user_id, status, started_at, worker_id) "
                           "VALUES ('video.render', '{}', 42, 'in_progress', now(), 'w')")
        await conn.execute("INSERT INTO jobs (type, input_data, user_id) VALUES ('video.render', '{}', 42), "
                           "('video.render', '{}', 42), ('image.generate', '{}', 1)")
        window = open_window(qtbot, test_db, JOB_LEASE_TIMEOUT=60)
        table = window.workers.panel.limits
        await until(lambda: table.rowCount() == 2, what="the limits")
        rows = {r[0]: r for r in table.rows()}
        assert rows["image.generate"][1:4] == ("rate 2/h", "2 in the last hour", "1")
        assert rows["image.generate"][4].startswith("in ")
        assert rows["video.render"][1:4] == ("1 running per user", "1 running, 1 user(s) at the limit", "2")
        assert table.isVisibleTo(window.workers.panel)
        # Both rows in sight, none behind a scroll bar.
        assert table.viewport().height() >= table.rowHeight(0) + table.rowHeight(1)
        await conn.close()
        await close(window)

    run_qasync(qapp, scenario())
