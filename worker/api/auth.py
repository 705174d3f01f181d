"""Bearer tokens and scopes: who is calling, and a `JobService` view restricted to what they may see."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.security import HTTPBearer

from jobdesk.api.errors import ApiError
from jobdesk.api.openapi_doc import F, amend, marked, operations
from jobdesk.core.rules import Actor
from jobdesk.service.jobs import JobService
from jobdesk.store.tokens import TokenRecord

# A token is read from the database at most this often per process, not on every request; a
# revocation clears every process's cache at once over NOTIFY, and this bounds how long one
# that missed the notification (its LISTEN connection was down) still accepts the token.
CACHE_SECONDS = 2.0

bearer = HTTPBearer(auto_error=False, description="A token from `jobdesk token create`.")


@dataclass(frozen=True)
class Caller:
    """Who makes a request: the service restricted to them, and their scopes."""

    service: JobService
    name: str | None  # the token's name; None without auth
    user_id: int | None  # set: a user's token, which sees that user's jobs only
    scopes: frozenset[str]

    @property
    def actor(self) -> Actor:
        return self.service.actor

    @property
    def owner(self) -> str:
        """Whose idempotency keys these are."""
        return self.name or ""


class TokenCache:
    """Token lookups, cached briefly per token (a miss is cached too, against floods of bad tokens).
    Concurrent requests that miss share one lookup: when an entry expires under load, the
    requests in flight would otherwise each read the token (and wait for a connection to)."""

    def __init__(self, service: JobService) -> None:
        self.service = service
        self._cache: dict[str, tuple[float, Caller | None]] = {}
        self._lookups: dict[str, asyncio.Future[Caller | None]] = {}  # per token, the lookup under way
        self._generation = 0  # bumped by every clear

    def clear(self, _payload: str = "") -> None:
        self._cache.clear()
        self._lookups.clear()  # a request from now on reads the token again
        self._generation += 1

    async def caller(self, token: str) -> Caller | None:
        key = token  # not its hash: hashing every request's token cost more than the lookup
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < CACHE_SECONDS:
            return hit[1]
        lookup = self._lookups.get(key)
        if lookup is None:
            lookup = self._lookups[key] = asyncio.ensure_future(self._lookup(key, token, now))
        # Shielded: a request that goes away does not cancel the lookup the others wait for.
        return await asyncio.shield(lookup)

    async def _lookup(self, key: str, token: str, now: float) -> Caller | None:
        generation = self._generation
        try:
            record = await self.service.authenticate(token)
        finally:
            if generation == self._generation:
                self._lookups.pop(key, None)
        caller = self._make(record) if record else None
        # A revocation heard while the lookup ran may have come after the row was read: then the
        # answer is used for the requests already waiting only, not kept for CACHE_SECONDS more.
        if generation == self._generation:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now, caller)
        return caller

    def _make(self, record: TokenRecord) -> Caller:
        actor = Actor("api", None, record.name)
        return Caller(self.service.as_actor(actor, user_id=record.user_id), record.name, record.user_id,
                      record.scopes)


_HEADERS = "jobdesk.headers"  # the scope's key of the request's headers by name, made once per request


def raw_header(request: Request, name: bytes) -> bytes | None:
    """A request header (`name` lower-case), straight from the ASGI scope, where the server has
    lower-cased the names: `request.headers.get` builds a mapping, and raises a KeyError inside
    for the common request without the header, on the hot routes. The first of repeated ones,
    as `request.headers.get` gives; the hot routes read three, from one mapping made for them
    (scanning the list for each cost more)."""
    scope = request.scope
    by_name: dict[bytes, bytes] | None = scope.get(_HEADERS)
    if by_name is None:
        by_name = scope[_HEADERS] = dict(reversed(scope["headers"]))
    return by_name.get(name)


def bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, as `bearer` (HTTPBearer without
    auto_error) reads it, but from the raw header: the credentials model it builds costs a share
    of every guarded request."""
    raw = raw_header(request, b"authorization")
    if not raw:
        return None
    scheme, _, token = raw.decode("latin-1").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


async def authorize(request: Request, scope: str) -> Caller:
    """The caller, who must hold `scope` (401 without a valid token, 403 without the scope)."""
    ctx = request.app.state.ctx
    if ctx.tokens is None:
        return ctx.anonymous  # type: ignore[no-any-return]
    token = bearer_token(request)
    if token is None:
        raise ApiError(401, "unauthorized", "a bearer token is required (Authorization: Bearer <token>)",
                       {"WWW-Authenticate": "Bearer"})
    caller: Caller | None = await ctx.tokens.caller(token)
    if caller is None:
        raise ApiError(401, "unauthorized", "the token is not valid or has been revoked",
                       {"WWW-Authenticate": "Bearer"})
    if scope not in caller.scopes:
        raise ApiError(403, "forbidden", f"the token {caller.name!r} lacks the {scope!r} scope")
    return caller


def require(scope: str) -> Callable[..., Awaitable[Caller]]:
    """A dependency: the caller, who must hold `scope` (see `authorize`)."""

    async def dependency(request: Request) -> Caller:
        # Called here rather than declared as a sub-dependency: FastAPI's solving of a nested
        # dependency cost a tenth of a plain GET. `document_security` puts it in the OpenAPI.
        return await authorize(request, scope)

    dependency.jobdesk_scope = scope  # type: ignore[attr-defined]
    return dependency


def guarded_by(scope: str) -> Callable[[F], F]:
    """Mark an endpoint that calls `authorize(request, scope)` itself, for `document_security`:
    the hot routes do, as FastAPI's solving of any dependency costs a share of their time."""
    return marked("jobdesk_scope", scope)


def document_security(app: FastAPI) -> None:
    """Declare the bearer scheme in the OpenAPI document on every route of `app` that requires a
    scope, as FastAPI does for a declared security dependency."""

    def declare(schema: dict[str, Any]) -> None:
        guarded = False
        for route, operation in operations(app, schema):
            if getattr(route.endpoint, "jobdesk_scope", None) or any(
                    getattr(d.call, "jobdesk_scope", None) for d in route.dependant.dependencies):
                guarded = True
                operation["security"] = [{bearer.scheme_name: []}]
        if guarded:
            schema.setdefault("components", {}).setdefault("securitySchemes", {})[bearer.scheme_name] = \
                bearer.model.model_dump(mode="json", by_alias=True, exclude_none=True)

    amend(app, declare)
