from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

from jobdesk.embedded.server import EmbeddedServer
from jobdesk.store.db import connect
from tests import bundle_build, pg
from tests.pgbouncer import PgBouncer


@pytest.fixture(scope="session")
def pg_server() -> Iterator[EmbeddedServer]:
    server, root = pg.start_server()
    asyncio.run(pg.skip_fsync(server.dsn))
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
async def template(pg_server: EmbeddedServer) -> str:
    await pg.build_template(pg_server.dsn)
    return pg_server.dsn


@pytest.fixture
async def dsn(template: str) -> AsyncIterator[str]:
    """A fresh, migrated database for this test."""
    url = await pg.create_test_database(template)
    yield url
    await pg.drop_test_database(url)


@pytest.fixture
async def conn(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await connect(dsn)
    yield connection
    await connection.close()


@pytest.fixture(scope="session")
def pgbouncer(pg_server: EmbeddedServer) -> Iterator[PgBouncer]:
    """PgBouncer in transaction pooling mode in front of the test server (installed if missing)."""
    bouncer = PgBouncer(pg_server).start()
    yield bouncer
    bouncer.stop()


BUNDLE_TESTS = Path(__file__).resolve().parent / "packaging" / "test_bundle.py"


def pytest_configure(config: pytest.Config) -> None:
    """On several processes, the controller starts the one bundle build that every worker waits
    for (tests/bundle_build.py), when the run may hold the bundle's tests."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args] or [BUNDLE_TESTS.parent]
    if any(path == BUNDLE_TESTS or path in BUNDLE_TESTS.parents for path in paths):
        bundle_build.share()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The bundle's tests go last, and its build starts now, in the background (or was started by
    the controller of several processes)."""
    bundled = [item for item in items if item.path.name == "test_bundle.py"]
    if bundled:
        items[:] = [item for item in items if item.path.name != "test_bundle.py"] + bundled
        bundle_build.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    bundle_build.stop()
