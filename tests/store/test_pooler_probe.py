"""Whether a URL reaches PostgreSQL through a pooler is found out once: callers asking at the same
time (a worker checks the schema while its pool opens) share one probe connection."""

from __future__ import annotations

import asyncio

import pytest

from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.store import db
from tests.pgbouncer import PgBouncer


async def test_callers_at_once_share_one_probe(dsn: str, pgbouncer: PgBouncer, monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[str] = []
    real = db._probe_pooler

    async def counted(url: str, clean: str, timeout: float) -> bool:
        probes.append(clean)
        return await real(url, clean, timeout)

    monkeypatch.setattr(db, "_probe_pooler", counted)
    pooled_url = pgbouncer.url(dsn, declared=False)
    for url in (dsn, pooled_url):
        db._probed.pop(db.split_pooler(url)[0], None)
    direct = await asyncio.gather(*(db.know_pooler(dsn) for _ in range(5)))
    pooled = await asyncio.gather(*(db.know_pooler(pooled_url) for _ in range(5)))
    assert direct == [False] * 5 and pooled == [True] * 5
    assert len(probes) == 2, probes
    assert await db.know_pooler(dsn) is False and len(probes) == 2, "the answer is kept"
    assert not db._probing


async def test_a_failed_probe_fails_each_caller_and_is_tried_again() -> None:
    url = "postgresql://nobody@127.0.0.1:9/none"  # the discard port: nothing listens there
    failures = await asyncio.gather(*(db.know_pooler(url, timeout=2) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(f, DatabaseUnavailable) for f in failures), failures
    assert url not in db._probed and not db._probing
