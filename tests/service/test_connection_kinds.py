"""`connection=` takes a framework's objects through the integration of that framework, which
registers itself with the service layer: the service names no integration of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import asyncpg
import psycopg
import pytest

from jobdesk import JobClient, SyncJobClient
from jobdesk.service import foreign
from jobdesk.service.foreign import ConnectionKind, register_connection_kind

SERVICE = Path(foreign.__file__).resolve().parent


class Wrapped:
    """A connection as a framework of the application's own hands it out, the driver's inside."""

    def __init__(self, driver: object) -> None:
        self.driver = driver


Wrapped.__module__ = "acmeframework.db"


async def _open_up(obj: object) -> object | None:
    return obj.driver if isinstance(obj, Wrapped) else None


@pytest.fixture
def acme(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `acmeframework` integration, registered as an integration registers itself on import."""
    monkeypatch.setattr(foreign, "_kinds", dict(foreign._kinds))
    register_connection_kind("acmeframework", ConnectionKind(
        sync_driver=lambda obj: obj.driver if isinstance(obj, Wrapped) else None, async_driver=_open_up))


async def test_a_registered_framework_s_connection_writes_in_its_transaction(
        acme: None, dsn: str, conn: asyncpg.Connection) -> None:
    async with await psycopg.AsyncConnection.connect(dsn) as app, await JobClient.connect(dsn) as jobs:
        async with app.transaction():
            kept = await jobs.enqueue("echo", {"n": 1}, connection=Wrapped(app))
        async with app.transaction(force_rollback=True):
            await jobs.enqueue("echo", {"n": 2}, connection=Wrapped(app))
    with psycopg.Connection.connect(dsn) as sync_app, SyncJobClient.connect(dsn) as sync_jobs:
        with sync_app.transaction():
            kept_sync = sync_jobs.enqueue("echo", {"n": 3}, connection=Wrapped(sync_app))
    rows = await conn.fetch("SELECT id, input_data->>'n' AS n FROM jobs ORDER BY input_data->>'n'")
    assert [(r["id"], r["n"]) for r in rows] == [(kept, "1"), (kept_sync, "3")]


async def test_a_framework_without_an_integration_is_the_one_type_error(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn) as app, await JobClient.connect(dsn) as jobs:
        with pytest.raises(TypeError, match="connection= takes.*got acmeframework.db.Wrapped"):
            await jobs.enqueue("echo", {}, connection=Wrapped(app))


def test_the_service_layer_imports_no_module_by_its_name() -> None:
    """An import by name hides an edge from the layers contract (ruff bans import_module too)."""
    for path in sorted(SERVICE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        named = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")]
        assert not named, f"{path.name}: lines {named}"
        assert "jobdesk.integrations" not in {node.module for node in ast.walk(tree)
                                              if isinstance(node, ast.ImportFrom)}, path.name
