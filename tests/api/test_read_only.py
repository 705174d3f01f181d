"""A write that lands on a read-only server (a standby, an old primary) is answered 503, not
500, and the API's pool drops its connections so that the next request finds a writable one."""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg

from tests.api.conftest import Api


async def test_a_read_only_server_is_503_then_reconnected(api: Api, dsn: str) -> None:
    database = urlsplit(dsn).path.lstrip("/")
    pool = api.service.pool
    await pool.execute(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    await pool.expire_connections()  # the sessions opened from now on are read-only
    refused = await api.client.post("/api/jobs", json={"type": "t", "input_data": {}})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "database_unavailable"
    assert refused.headers["Retry-After"]
    admin = await asyncpg.connect(dsn)  # read-only too, until told otherwise: not one of the pool's
    try:
        await admin.execute("SET default_transaction_read_only = off")
        await admin.execute(f"ALTER DATABASE {database} RESET default_transaction_read_only")
    finally:
        await admin.close()
    # The sessions opened before the reset are read-only still, unless the 503 dropped them.
    accepted = await api.client.post("/api/jobs", json={"type": "t", "input_data": {}})
    assert accepted.status_code == 201, accepted.text
