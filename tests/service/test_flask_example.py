"""The Flask example of the documentation (docs/enqueueing.md), run as it is written there: on
DATABASE_URL, a view that saves an order and enqueues its job in one transaction of its own
psycopg connection, and a view that reads the job."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType

import asyncpg
import pytest

from tests.helpers import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "flask_app.py"
PAGE = ROOT / "docs" / "enqueueing.md"


@pytest.fixture
def example(dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The example imported with DATABASE_URL set to the test's database, its client closed after."""
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.delenv("DATABASE_LISTEN_URL", raising=False)
    spec = importlib.util.spec_from_file_location("flask_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["flask_app"] = module
    spec.loader.exec_module(module)
    try:
        yield module
    finally:
        module.jobs.close()
        sys.modules.pop("flask_app", None)


def test_the_page_shows_the_example_as_it_is() -> None:
    assert f"```python\n{EXAMPLE.read_text()}```" in PAGE.read_text()


async def test_an_order_and_its_job_are_written_together(example: ModuleType, conn: asyncpg.Connection) -> None:
    await conn.execute("CREATE TABLE orders (id text PRIMARY KEY)")
    client = example.app.test_client()
    placed = client.post("/orders/o-1")
    assert placed.status_code == 202
    job_id = placed.get_json()["job"]
    assert await conn.fetchval("SELECT count(*) FROM orders WHERE id = 'o-1'") == 1
    assert await conn.fetchval("SELECT input_data->>'order' FROM jobs WHERE id = $1", job_id) == "o-1"
    shown = client.get(f"/jobs/{job_id}")
    assert shown.status_code == 200 and shown.get_json() == {"status": "queued", "result": None}
    assert client.get("/jobs/nope").status_code == 404

    # The same order again: the INSERT fails, and the transaction takes its job with it.
    example.app.config["PROPAGATE_EXCEPTIONS"] = False
    again = client.post("/orders/o-1")
    assert again.status_code == 500
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'order.confirm'") == 1
