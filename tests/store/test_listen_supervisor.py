"""ListenerSupervisor against a real PostgreSQL: notifications reach their handler, a killed
listen connection comes back by itself, a deaf one is noticed, no listen URL means polling, and
stop() leaves nothing behind. Each change is told to the owner, and logged, once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobdesk.store.listen_supervisor import Cause, ListenerSupervisor, ListenTiming, ListenWording, Polling
from jobdesk.store.listener import NO_LISTEN_REASON, Listener, Sender
from tests import pg
from tests.helpers import wait_for

CHANNEL = "jd_test_channel"
APP = "jd-supervised"
LOGGER = "jobdesk.test.listen"


class Owner:
    """Records what the supervisor tells it, as "listening" or the Polling."""

    def __init__(self) -> None:
        self.told: list[str | Polling] = []
        self.payloads: list[str] = []

    def listening(self) -> None:
        self.told.append("listening")

    def polling(self, polling: Polling) -> None:
        self.told.append(polling)

    def supervisor(self, dsn: str | None, *, send: Sender | None = None,
                   cls: type[ListenerSupervisor] = ListenerSupervisor) -> ListenerSupervisor:
        return cls(dsn, {CHANNEL: self.payloads.append}, on_listening=self.listening,
                   on_polling=self.polling, send=send,
                   timing=ListenTiming(heartbeat_interval=0.3, check_interval=0.05, retry_min=0.05, retry_max=0.2,
                                       relisten_max=0.6),
                   wording=ListenWording(subject="test changes", meanwhile="polling every 0.1 s",
                                         logger=logging.getLogger(LOGGER), name="test-listener"))

    @property
    def causes(self) -> list[str | Cause]:
        return [t if isinstance(t, str) else t.cause for t in self.told]


@pytest.fixture
def owner(caplog: pytest.LogCaptureFixture) -> Owner:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return Owner()


@pytest.fixture
async def writers(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    """The owner's own pool, through which NOTIFYs (and the heartbeat) are sent."""
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    yield pool
    await pool.close()


def sender(pool: asyncpg.Pool) -> Sender:
    return lambda channel, payload: pool.execute("SELECT pg_notify($1, $2)", channel, payload)


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and text in r.getMessage()]


async def listen_pids(conn: asyncpg.Connection) -> list[int]:
    rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE application_name = $1", APP)
    return [r["pid"] for r in rows]


async def test_notifications_reach_the_handler(dsn: str, conn: asyncpg.Connection, writers: asyncpg.Pool,
                                               owner: Owner, caplog: pytest.LogCaptureFixture) -> None:
    async with owner.supervisor(dsn, send=sender(writers)) as supervisor:
        assert supervisor.listening and supervisor.polling is None
        assert owner.told == ["listening"]
        await conn.execute(f"NOTIFY {CHANNEL}, 'job-1'")
        await writers.execute("SELECT pg_notify($1, 'job-2')", CHANNEL)
        await wait_for(lambda: asyncio.sleep(0, owner.payloads == ["job-1", "job-2"]), timeout=5,
                       what="the notifications")
        await asyncio.sleep(1.0)  # a few heartbeats come and go, unnoticed by the owner
        assert owner.told == ["listening"] and supervisor.heard
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


async def test_a_killed_listen_connection_comes_back(dsn: str, conn: asyncpg.Connection, owner: Owner,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    async with owner.supervisor(f"{dsn}&application_name={APP}") as supervisor:
        [pid] = await wait_for(lambda: listen_pids(conn), what="the listen connection")
        await conn.execute("SELECT pg_terminate_backend($1)", pid)
        await wait_for(lambda: asyncio.sleep(0, owner.causes == ["listening", Cause.LOST, "listening"]),
                       timeout=10, what="polling, then listening again")
        assert supervisor.listening
        [new_pid] = await listen_pids(conn)
        assert new_pid != pid
        await conn.execute(f"NOTIFY {CHANNEL}, 'after'")
        await wait_for(lambda: asyncio.sleep(0, owner.payloads == ["after"]), timeout=5, what="a notification")
    assert len(lines(caplog, "was lost")) == 1
    assert len(lines(caplog, "listening for test changes again")) == 1


async def test_a_listener_on_another_database_is_deaf(dsn: str, template: str, writers: asyncpg.Pool,
                                                      owner: Owner, caplog: pytest.LogCaptureFixture) -> None:
    """NOTIFY goes to the owner's database; the listen URL points at another one of the server."""
    other = await pg.create_test_database(template)
    try:
        async with owner.supervisor(other, send=sender(writers)) as supervisor:
            await wait_for(lambda: asyncio.sleep(0, Cause.DEAF in owner.causes), timeout=10, what="deafness")
            assert not supervisor.listening
            polling = supervisor.polling
            assert polling is not None and polling.cause is Cause.DEAF
            await asyncio.sleep(2.0)  # listened to again, deaf again: the owner hears nothing new
            assert owner.causes == ["listening", Cause.DEAF]
            await writers.execute("SELECT pg_notify($1, 'unheard')", CHANNEL)
            await asyncio.sleep(0.3)
            assert owner.payloads == []
    finally:
        await pg.drop_test_database(other)
    assert len(lines(caplog, "went deaf")) == 1


async def test_without_a_listen_url_the_owner_polls(owner: Owner, caplog: pytest.LogCaptureFixture) -> None:
    async with owner.supervisor(None) as supervisor:
        assert owner.told == [Polling(Cause.NO_LISTEN, NO_LISTEN_REASON)]
        assert not supervisor.listening
        await asyncio.sleep(0.3)
        assert len(owner.told) == 1
    assert lines(caplog, NO_LISTEN_REASON) == [f"{NO_LISTEN_REASON}: polling every 0.1 s"]


async def test_an_unreachable_listen_url_is_logged_once(dsn: str, owner: Owner,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A bad DATABASE_LISTEN_URL (here a database that does not exist): polling, tried again
    and again, said once."""
    async with owner.supervisor(pg.with_database(dsn, "jd_no_such_database")) as supervisor:
        assert owner.causes == [Cause.UNAVAILABLE]
        await asyncio.sleep(1.0)  # several attempts, each failed
        assert not supervisor.listening and owner.causes == [Cause.UNAVAILABLE]
    assert len(lines(caplog, "cannot listen for test changes")) == 1


async def test_stop_leaves_no_task_and_no_connection(dsn: str, conn: asyncpg.Connection, owner: Owner) -> None:
    supervisor = owner.supervisor(f"{dsn}&application_name={APP}")
    await supervisor.start()
    await wait_for(lambda: listen_pids(conn), what="the listen connection")
    await asyncio.sleep(0.2)  # a check or two under way
    await supervisor.stop()
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("test-listener")]
    assert not supervisor.listening
    await wait_for(lambda: _no_pids(conn), timeout=5, what="the listen connection to go")
    await supervisor.stop()  # a second stop does nothing


class LosesACancellation(ListenerSupervisor):
    """Its watch loses the first cancellation, as Python 3.11's asyncio.wait_for does when the
    call it waits for ends at the same moment, and goes on checking."""

    lost = 0

    async def _watch(self, listener: Listener) -> Polling:
        while True:
            try:
                await asyncio.sleep(self.check_interval)
            except asyncio.CancelledError:
                if self.lost:
                    raise
                self.lost += 1


async def test_stop_ends_the_task_even_when_a_cancellation_is_lost(dsn: str, conn: asyncpg.Connection,
                                                                    owner: Owner) -> None:
    supervisor = owner.supervisor(f"{dsn}&application_name={APP}", cls=LosesACancellation)
    await supervisor.start()
    await wait_for(lambda: listen_pids(conn), what="the listen connection")
    await asyncio.wait_for(supervisor.stop(), 5)  # a single cancel waited forever
    assert isinstance(supervisor, LosesACancellation) and supervisor.lost == 1
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("test-listener")]
    await wait_for(lambda: _no_pids(conn), timeout=5, what="the listen connection to go")


async def _no_pids(conn: asyncpg.Connection) -> bool:
    return not await listen_pids(conn)
