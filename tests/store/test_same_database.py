"""`same_database`: whether two URLs name one database, as `jobdesk worker --django` compares
DATABASE_URL with Django's."""

from __future__ import annotations

import pytest

from jobdesk.store.same_database import same_database


@pytest.mark.parametrize(("a", "b"), [
    ("postgresql://postgres@127.0.0.1:5433/shop", "postgresql://app:secret@127.0.0.1:5433/shop?sslmode=disable"),
    ("postgresql://postgres@/jobdesk?host=/var/lib/jobdesk/pg/run&port=5432",
     "postgresql://postgres@/jobdesk?host=/var/lib/jobdesk/pg/run&port=5432&pgbouncer=false"),
    ("postgresql://u@db.example:5432/shop", "postgresql://u@db.example/shop"),
])
def test_the_same_database_whatever_the_user_and_options(a: str, b: str) -> None:
    assert same_database(a, b)


@pytest.mark.parametrize(("a", "b"), [
    ("postgresql://postgres@127.0.0.1:5433/shop", "postgresql://postgres@127.0.0.1:5433/postgres"),
    ("postgresql://postgres@127.0.0.1:5433/shop", "postgresql://postgres@127.0.0.1:5434/shop"),
    ("postgresql://postgres@/jobdesk?host=/a/pg/run&port=5432", "postgresql://postgres@/jobdesk?host=/b/pg/run&port=5432"),
])
def test_another_name_host_or_port_is_another_database(a: str, b: str) -> None:
    assert not same_database(a, b)
