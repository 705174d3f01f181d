"""The database a process works on: chosen once from the settings, with the listen URL that
belongs to it, and a revive that only the embedded default has."""

from __future__ import annotations

import pytest

from jobdesk.core.settings import load_settings
from jobdesk.store.db import Database, known_direct

URL = "postgresql://jd@db.example:5432/jobs"
LISTEN = "postgresql://jd@db-direct.example:5432/jobs"


def test_database_url_is_used_as_given_with_its_listen_url() -> None:
    database = Database.resolve(load_settings(DATABASE_URL=URL, DATABASE_LISTEN_URL=LISTEN))
    assert database == Database(URL, embedded=False, listen_url=LISTEN)
    assert database.listen_dsn() == LISTEN
    assert database.describe() == "jobs on db.example:5432"


def test_the_listen_url_belongs_to_database_url_only() -> None:
    settings = load_settings(DATABASE_URL=URL, DATABASE_LISTEN_URL=LISTEN)
    other = Database.given("postgresql://jd@elsewhere:5432/other", settings)
    assert other.listen_url is None
    known_direct(other.dsn)
    assert other.listen_dsn() == other.dsn, "a direct connection listens on its own URL"


def test_a_declared_pooler_without_listen_url_polls() -> None:
    assert Database.given(URL + "?pgbouncer=true").listen_dsn() is None


def test_only_the_embedded_default_is_revived(monkeypatch: pytest.MonkeyPatch) -> None:
    import jobdesk.embedded.server as embedded

    def no_server() -> None:
        raise AssertionError("a database given by URL never touches the embedded server")

    monkeypatch.setattr(embedded, "embedded_server", no_server)
    assert Database.given(URL).revive() is False


def test_the_embedded_revive_is_the_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    import jobdesk.embedded.server as embedded

    class Server:
        dsn = "postgresql://postgres@/jobdesk?host=/run&port=5432"
        revived = 0

        def revive(self) -> bool:
            self.revived += 1
            return True

    server = Server()
    monkeypatch.setattr(embedded, "embedded_server", lambda: server)
    assert Database(Server.dsn, embedded=True).revive() is True
    assert Database("postgresql://postgres@/other?host=/run", embedded=True).revive() is False
    assert server.revived == 1
