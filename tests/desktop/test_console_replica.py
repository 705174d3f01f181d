"""The console with DATABASE_READ_URL on a real streaming standby (tests/read_replica.py),
offscreen: it reads the standby and LISTENs and acts on the primary; after its own action it
shows the job's new state while the standby's replay is paused; a job another process adds
shows up too; and the status bar says how far behind the standby is once that is over 1 s."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from PySide6.QtWidgets import QApplication

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from tests.desktop.qt_helpers import run_qasync, until
from tests.read_replica import pause_replay, replica_settings, resume_replay, start_pair
from tests.replication import Pair


@pytest.fixture
def pair() -> Iterator[Pair]:
    replicated = start_pair()
    try:
        yield replicated
    finally:
        replicated.stop()


def statuses(window: MainWindow) -> dict[str, str]:
    rows = (window.model.row_at(i) for i in range(window.model.rowCount()))
    return {row.id: str(row.status) for row in rows if row is not None}


def test_console_reads_the_standby_and_its_own_writes(qapp: QApplication, qtbot, pair: Pair,  # type: ignore[no-untyped-def]
                                                      tmp_path: Path) -> None:
    settings = replica_settings(pair, JOBDESK_AUTOSTART_WORKER=False, JOBDESK_NOTIFICATIONS=False)

    async def scenario() -> None:
        primary = await asyncpg.connect(pair.primary.dsn())
        standby = await asyncpg.connect(pair.standby.dsn())
        await primary.execute("INSERT INTO jobs (id, type, input_data) VALUES ('job-a', 'echo', '{}')")
        connection = ConsoleConnection(pair.primary.dsn(), settings, embedded=False)
        window = MainWindow(connection)
        qtbot.addWidget(window)
        window.show()
        connection.start()
        try:
            await until(lambda: connection.is_connected, what="the connection")
            assert connection.replica is not None and pair.standby.host in connection.describe()
            await until(lambda: statuses(window).get("job-a") == "queued", what="the first rows")
            # The console's reads are on the standby, its LISTEN on the primary.
            on_standby = await standby.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'jobdesk-console'")
            assert on_standby >= 1
            assert connection.listening
            assert not window.replica_lag.isVisible()

            await pause_replay(pair)
            # Its own action: the row shows the new state although the standby has not replayed it.
            changed = await window.job_actions.perform("cancel", ["job-a"])
            assert changed == ["job-a"]
            assert await standby.fetchval("SELECT status FROM jobs WHERE id = 'job-a'") == "queued"
            await until(lambda: statuses(window).get("job-a") == "cancelled", what="the cancelled row")
            # Another process's job: heard on the primary, shown though the standby lacks it.
            await primary.execute("INSERT INTO jobs (id, type, input_data) VALUES ('job-b', 'echo', '{}')")
            await until(lambda: "job-b" in statuses(window), timeout=10, what="the new row")

            # The standby falls behind while the primary keeps writing: the status bar says so.
            for n in range(3):
                await primary.execute("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'echo', '{}')",
                                      f"job-c{n}")
                await asyncio.sleep(0.5)
            await until(window.replica_lag.isVisible, timeout=10, what="the replica's lag in the status bar")
            assert re.fullmatch(r"replica \d+\.\d s behind", window.replica_lag.text()), window.replica_lag.text()
            assert window.replica_lag.lag is not None and window.replica_lag.lag.seconds > 1.0
            shot = Path(os.environ.get("JOBDESK_REPLICA_SHOT", tmp_path / "replica-lag.png"))
            assert window.grab().save(str(shot))

            await resume_replay(pair)
            await until(lambda: not window.replica_lag.isVisible(), timeout=10, what="the lag gone")
            assert await standby.fetchval("SELECT status FROM jobs WHERE id = 'job-a'") == "cancelled"
        finally:
            await resume_replay(pair)
            await connection.close()
            window.close()
            await primary.close()
            await standby.close()

    run_qasync(qapp, scenario())
