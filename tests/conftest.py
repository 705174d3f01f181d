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
    pg.stop_spares()
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
async def template(pg_server: EmbeddedServer) -> str:
    await pg.build_template(pg_server.dsn)
    pg.make_spares(pg_server.dsn)
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


# The longest tests (or modules), longest first. They start the run, one on each process of
# `pytest -n 3`, and the short tests fill in behind them: the processes then end
# together, instead of one running a long test alone at the end. A name missing here only costs time.
LONGEST_FIRST = (
    "tests/chaos/test_chaos_quick.py",
    "tests/packaging/test_installed_wheel.py",
    "tests/embedded/test_embedded.py::test_console_and_worker_keep_the_server_through_many_commands",
    "tests/test_bench_report.py::test_the_report_reads_every_benchmark_and_fills_the_page",
    "tests/api/test_api_schema.py",
    "tests/embedded/test_embedded.py::test_db_status_and_stop",
    "tests/embedded/test_resilience.py::test_a_worker_stopped_while_the_database_is_down_still_exits",
    "tests/desktop/test_platform_check.py",
    "tests/embedded/test_resilience.py::test_pause_resume_and_drain_through_the_control_channel",
    "tests/runtime/test_type_controls.py",
    "tests/store/test_failover.py",
    "tests/embedded/test_embedded.py",
    "tests/runtime/test_lease_off_loop.py",
    "tests/runtime/test_scheduler.py::test_three_workers_make_exactly_one_job_per_tick_across_a_restart",
    "tests/runtime/test_flow_control.py",
    "tests/service/test_unavailable.py",
    "tests/service/test_read_replica.py",
    "tests/embedded/test_resilience.py",
)
# Modules whose tests share an expensive module-scoped fixture (a built wheel in its own virtual
# environment, a replicated pair of servers, an X server, an API server): one process runs all of
# a module's tests, so that its fixture is set up once per run.
SHARED_SETUP = ("tests/packaging/test_installed_wheel.py", "tests/service/test_read_replica.py",
                "tests/desktop/test_platform_check.py", "tests/api/test_api_schema.py")


def _rank(item: pytest.Item) -> int:
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid == prefix or item.nodeid.startswith(prefix + ("::" if prefix.endswith(".py") else "[")):
            return rank
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tests go first and the bundle's tests last, and the bundle's build starts now, in
    the background (or was started by the controller of several processes)."""
    items.sort(key=lambda item: (item.path.name == "test_bundle.py", _rank(item)))
    if items and items[-1].path.name == "test_bundle.py":
        bundle_build.start()


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`-n N` hands out the tests one by one in the order above (a process is given the next one when
    it has two left), except that a module of SHARED_SETUP goes to one process whole."""
    if config.option.dist != "load":
        return None  # another --dist, asked for by name
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in SHARED_SETUP else nodeid

    config.option.loadscopereorder = False  # keep the order: no bigger scopes first
    return Scheduling(config, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    bundle_build.stop()
