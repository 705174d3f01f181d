"""503 with Retry-After while PostgreSQL is down, and recovery when it is back (a private server,
so the shared one stays up)."""

from __future__ import annotations

import asyncio
import shutil
import time

import httpx

from jobdesk.api import create_app
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService, migrate_database
from tests import pg


async def test_503_while_the_database_is_down_then_recovery() -> None:
    server, root = pg.start_server()
    try:
        await migrate_database(server.dsn)
        service = await JobService.connect(server.dsn, settings=load_settings(), pool_size=3)
        app = create_app(service, server.dsn, auth=False)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
                job = (await client.post("/api/jobs", json={"type": "t", "input_data": {}})).json()
                await asyncio.to_thread(server.stop)
                for path in (f"/api/jobs/{job['id']}", "/healthz"):
                    resp = await client.get(path)
                    assert resp.status_code == 503, resp.text
                    assert resp.headers["Retry-After"] and resp.json()["error"]["code"] == "database_unavailable"
                await asyncio.to_thread(server.ensure_running)
                deadline = time.monotonic() + 15
                while (await client.get(f"/api/jobs/{job['id']}")).status_code != 200:
                    assert time.monotonic() < deadline, "the API did not recover"
                    await asyncio.sleep(0.2)
                assert (await client.get("/healthz")).status_code == 200
        await service.close()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
