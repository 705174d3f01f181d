from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from jobdesk.api import create_app
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService


@dataclass
class Api:
    client: httpx.AsyncClient
    service: JobService
    tokens: dict[str, str]

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}


@pytest.fixture
async def api(dsn: str) -> AsyncIterator[Api]:
    """The app over httpx's ASGI transport, with tokens: `admin` (every scope, no user), `alice`
    (user 2) and `bob` (user 3), and one per scope (`read`, `submit`, `operate`, `approve`)."""
    service = await JobService.connect(dsn, settings=load_settings(JOBDESK_API_MAX_BODY=4096), pool_size=8)
    await service.pool.execute("INSERT INTO users (id, name) VALUES (2, 'alice'), (3, 'bob')")
    tokens = {"admin": await service.create_token("admin"),
              "alice": await service.create_token("alice", user_id=2),
              "bob": await service.create_token("bob", user_id=3)}
    for scope in ("read", "submit", "operate", "approve"):
        tokens[scope] = await service.create_token(scope, scopes=[scope])
    async with serve(service, dsn, tokens) as served:
        yield served
    await service.close()


@contextlib.asynccontextmanager
async def serve(service: JobService, dsn: str, tokens: dict[str, str], **options: Any) -> AsyncIterator[Api]:
    """`create_app(service, dsn, **options)` started, over httpx's ASGI transport, the client
    calling with the `admin` token."""
    app = create_app(service, dsn, settings=service.settings, **options)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            client.headers["Authorization"] = f"Bearer {tokens['admin']}"
            yield Api(client, service, tokens)
