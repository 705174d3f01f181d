"""Tokens are cached per API process: a revocation takes effect at once over NOTIFY, and within
CACHE_SECONDS when the notification never comes."""

from __future__ import annotations

import asyncio

import pytest

from jobdesk.api import auth
from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_error


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


async def test_concurrent_misses_share_one_lookup(api: Api) -> None:
    cache = auth.TokenCache(api.service)
    lookup = api.service.authenticate
    calls = 0

    async def counted_lookup(token: str):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)  # long enough for every request below to miss
        return await lookup(token)

    api.service.authenticate = counted_lookup  # type: ignore[method-assign]
    try:
        callers = await asyncio.gather(*(cache.caller(api.tokens["read"]) for _ in range(20)),
                                       *(cache.caller("no-such-token") for _ in range(5)))
        assert calls == 2  # one per token, not one per request
        assert {c.name for c in callers[:20] if c is not None} == {"read"} and callers[20:] == [None] * 5
        await cache.caller(api.tokens["read"])  # served from the cache
        assert calls == 2
        cache.clear()
        assert (await cache.caller(api.tokens["read"])) is not None
        assert calls == 3  # a clear makes the next request read the token again
    finally:
        del api.service.authenticate


async def test_a_cancelled_request_does_not_cancel_the_shared_lookup(api: Api) -> None:
    cache = auth.TokenCache(api.service)
    lookup = api.service.authenticate

    async def slow_lookup(token: str):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.1)
        return await lookup(token)

    api.service.authenticate = slow_lookup  # type: ignore[method-assign]
    try:
        first = asyncio.ensure_future(cache.caller(api.tokens["read"]))
        second = asyncio.ensure_future(cache.caller(api.tokens["read"]))
        await asyncio.sleep(0.02)
        first.cancel()
        caller = await second
        assert caller is not None and caller.name == "read"
        assert first.cancelled()
    finally:
        del api.service.authenticate
