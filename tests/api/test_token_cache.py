"""Tokens are cached per API process: a revocation takes effect at once over NOTIFY, and within
CACHE_SECONDS when the notification never comes."""

from __future__ import annotations

import asyncio

import pytest

from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_error
from worker.api import auth


async def test_a_revocation_without_notify_takes_effect_within_the_cache_time(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "CACHE_SECONDS", 0.5)
    assert (await api.client.get("/api/jobs", headers=api.auth("read"))).status_code == 200
    # Revoked behind the API's back: no NOTIFY, so only the cache's age can end the token.
    await api.service.pool.execute("UPDATE api_tokens SET revoked_at = now() WHERE name = 'read'")
    assert (await api.client.get("/api/jobs", headers=api.auth("read"))).status_code == 200  # still cached
    await asyncio.sleep(0.6)
    assert_error(await api.client.get("/api/jobs", headers=api.auth("read")), 401, "unauthorized")


async def test_a_clear_during_a_lookup_keeps_its_answer_out_of_the_cache(api: Api) -> None:
    cache = auth.TokenCache(api.service)
    lookup = api.service.authenticate
    cleared = False

    async def slow_lookup(token: str):  # type: ignore[no-untyped-def]
        nonlocal cleared
        record = await lookup(token)
        cache.clear()  # a revocation heard after the row was read
        cleared = True
        return record

    api.service.authenticate = slow_lookup  # type: ignore[method-assign]
    try:
        assert await cache.caller(api.tokens["read"]) is not None  # this request still gets in
    finally:
        del api.service.authenticate
    assert cleared and cache._cache == {}
    await api.service.pool.execute("UPDATE api_tokens SET revoked_at = now() WHERE name = 'read'")
    assert await cache.caller(api.tokens["read"]) is None  # read again, not served from the cache
