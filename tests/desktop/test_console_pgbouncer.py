"""The console through PgBouncer in transaction mode, offscreen: it connects and shows jobs; it
polls (and says so once) without DATABASE_LISTEN_URL, and listens there when it is given."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import pytest
from PySide6.QtWidgets import QApplication

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from jobdesk.core.settings import load_settings
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until
from tests.pgbouncer import PgBouncer


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def ids_shown(window: MainWindow) -> set[str]:
    return {window.model.row_at(i).id for i in range(window.model.rowCount())}  # type: ignore[union-attr]


def test_console_through_pgbouncer(qapp: QApplication, qtbot, test_db: str,  # type: ignore[no-untyped-def]
                                   pgbouncer: PgBouncer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobdesk.console")
    pooled = pgbouncer.url(test_db)

    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('job-a', 'echo', '{}')")
        for listen_url in (None, test_db):
            settings = load_settings(DATABASE_URL=pooled, DATABASE_LISTEN_URL=listen_url)
            connection = ConsoleConnection(pooled, settings, embedded=False)
            window = MainWindow(connection)
            qtbot.addWidget(window)
            window.show()
            connection.start()
            try:
                await until(lambda: connection.is_connected, what="the connection through PgBouncer")
                await until(lambda: "job-a" in ids_shown(window), what="the first rows")
                assert connection.listening == (listen_url is not None)
                new_id = f"job-{'listen' if listen_url else 'poll'}"
                await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'echo', '{}')", new_id)
                await until(lambda: new_id in ids_shown(window), timeout=6, what="the new row")
                await window.refresh_counts()
            finally:
                await connection.close()
                window.close()
        await conn.close()
        said = [r.getMessage() for r in caplog.records if "DATABASE_LISTEN_URL is not set" in r.getMessage()]
        assert len(said) == 1 and "polling for changes" in said[0]
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text

    run_qasync(qapp, scenario())
