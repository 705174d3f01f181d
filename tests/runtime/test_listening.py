"""The worker's LISTEN when its listen URL does not answer: it polls, and says so once."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator

import asyncpg
import pytest

from jobdesk.core.settings import load_settings
from jobdesk.processors.builtin import EchoProcessor
from jobdesk.runtime import listening
from jobdesk.store.listener import Listener
from tests.helpers import RunningWorker, wait_for

CANNOT_LISTEN = "cannot listen for new jobs"
AGAIN = "listening for new jobs again"


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A loopback port where nothing listens: bound, so that nobody else takes it, and refusing."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The listen URL of every attempt to open a listener."""
    tried: list[str] = []
    real_open = Listener.open

    async def counting_open(self: Listener) -> None:
        tried.append(self.dsn)
        await real_open(self)

    monkeypatch.setattr(Listener, "open", counting_open)
    return tried


def said(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


async def test_unreachable_listen_url_polls_and_says_so_once(dsn: str, conn: asyncpg.Connection, dead_port: int,
                                                             attempts: list[str],
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobdesk.worker")
    listen_url = f"postgresql://jobdesk@127.0.0.1:{dead_port}/nowhere"
    worker = RunningWorker(dsn, {"echo": EchoProcessor()}, DATABASE_LISTEN_URL=listen_url,
                           JOB_LISTEN_HEARTBEAT_INTERVAL=0.2, JOB_PROCESSOR_POLL_INTERVAL=0.2)
    try:
        job_id = await conn.fetchval("INSERT INTO jobs (type, input_data) VALUES ('echo', '{}') RETURNING id")
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       timeout=10, what="a job taken by polling")
        await wait_for(lambda: asyncio.sleep(0, len(attempts) >= 4), timeout=10, what="the listener to be retried")
        assert not worker.task.done(), "the worker runs on without its listener"
        assert not worker.worker.listening.heard
    finally:
        await worker.stop()
    assert set(attempts) == {listen_url}
    lines = said(caplog, CANNOT_LISTEN)
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    assert "polling for new jobs every 0.2 s" in lines[0].getMessage() and lines[0].levelno == logging.WARNING
    assert not said(caplog, AGAIN)
    assert not any(r.exc_info for r in caplog.records), "one line, no traceback"


async def test_listening_again_is_said_once(dsn: str, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    """A listen URL that refuses for a while, then answers: one line when it fails, one when it
    listens again, and the pumps are woken then (work may have been announced unheard)."""
    caplog.set_level(logging.INFO, logger="jobdesk.worker")
    refusing = True
    real_open = Listener.open

    async def open_when_allowed(self: Listener) -> None:
        if refusing:
            raise ConnectionRefusedError("refused for the test")
        await real_open(self)

    monkeypatch.setattr(Listener, "open", open_when_allowed)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    woken: list[bool] = []
    settings = load_settings(DATABASE_URL=dsn, DATABASE_LISTEN_URL=dsn, JOB_LISTEN_HEARTBEAT_INTERVAL=0.2,
                             JOB_PROCESSOR_POLL_INTERVAL=0.2)
    watch = listening.worker_listener(dsn, settings, {}, on_listening=lambda: woken.append(True),
                                      send=lambda ch, p: pool.execute("SELECT pg_notify($1, $2)", ch, p))
    await watch.start()
    try:
        await asyncio.sleep(1.0)  # a few attempts fail meanwhile
        refusing = False
        await wait_for(lambda: asyncio.sleep(0, watch.heard), timeout=10, what="the listener to hear its heartbeat")
    finally:
        await watch.stop(2)
        await pool.close()
    assert len(said(caplog, "cannot listen for new jobs (refused for the test)")) == 1
    assert len(said(caplog, AGAIN)) == 1
    assert woken == [True]
