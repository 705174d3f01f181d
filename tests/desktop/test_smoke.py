"""`jobdesk --smoke-test`: the console connects, shows the jobs, prints one line and exits."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from urllib.parse import urlsplit

import asyncpg
import pytest
from PySide6.QtWidgets import QApplication

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from jobdesk.console.smoke import smoke_test
from jobdesk.core.settings import load_settings
from tests import pg
from tests.desktop.qt_helpers import run_qasync
from tests.helpers import ROOT, cli_env


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def console(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    """`jobdesk ARGS` as a user runs it, through the launcher, offscreen."""
    return subprocess.run([sys.executable, "-m", "jobdesk.console.launcher", *args], capture_output=True, text=True,
                          env=cli_env(dsn, QT_QPA_PLATFORM="offscreen"), cwd=ROOT, timeout=60)


def errors(stderr: str) -> list[str]:
    """stderr without the offscreen platform's remark about size hints."""
    return [line for line in stderr.splitlines() if "propagateSizeHints" not in line]


async def query(dsn: str, sql: str) -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


def test_smoke_test_shows_the_jobs_and_exits(test_db: str) -> None:
    asyncio.run(query(test_db, "INSERT INTO jobs (type, input_data) VALUES ('echo', '{}'), ('sleep', '{}')"))
    done = console("--smoke-test", dsn=test_db)
    assert done.returncode == 0, done.stderr
    db = urlsplit(test_db).path.lstrip("/")
    assert done.stdout.startswith(f"smoke: connected to {db} on ") and done.stdout.endswith(", 2 jobs shown\n")
    assert errors(done.stderr) == []
    assert asyncio.run(query(test_db, "SELECT count(*) FROM workers")) == 0, "it starts no worker"
    assert asyncio.run(query(test_db, "SELECT count(*) FROM jobs WHERE status = 'queued'")) == 2


def test_smoke_test_without_a_database_is_one_line() -> None:
    done = console("--smoke-test", dsn="postgresql://ops:s3cret@127.0.0.1:1/jobs_db?sslmode=disable")
    assert done.returncode == 1 and done.stdout == ""
    assert errors(done.stderr) == [
        "jobdesk: error: smoke test: cannot connect to PostgreSQL at jobs_db on 127.0.0.1:1: "
        "[Errno 111] Connect call failed ('127.0.0.1', 1)"]


def test_smoke_test_fails_when_no_job_is_shown(qapp: QApplication, qtbot, test_db: str,  # type: ignore[no-untyped-def]
                                               capsys: pytest.CaptureFixture[str]) -> None:
    connection = ConsoleConnection(test_db, load_settings(DATABASE_URL=test_db), embedded=False)
    window = MainWindow(connection)
    qtbot.addWidget(window)

    async def scenario() -> int:
        window.show()
        connection.start()
        return await smoke_test(window, rows_timeout=0.5)

    assert run_qasync(qapp, scenario()) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("jobdesk: error: smoke test: connected to ")
    assert err.endswith("but the job table shows no job after 0.5 s\n") and err.count("\n") == 1
    assert not window.isVisible() and connection.client is None, "the window closed, the connection too"


def test_the_console_without_a_display_says_so_in_one_line() -> None:
    env = {k: v for k, v in cli_env(None).items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run([sys.executable, "-m", "jobdesk.console.launcher"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("jobdesk: error: no display") and "QT_QPA_PLATFORM=offscreen" in line
