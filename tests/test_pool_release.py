"""A pooled connection goes back to the pool without asyncpg's session-reset round trip, and
still without an open transaction or a transaction-local setting."""

from __future__ import annotations

from worker.db import create_pool


async def test_release_sends_no_reset_query_and_rolls_back_an_open_transaction(dsn: str) -> None:
    pool = await create_pool(dsn, size=1)
    try:
        seen: list[str] = []
        async with pool.acquire() as conn:
            raw = conn._con  # the connection behind the proxy, which the pool hands out again
            raw.add_query_logger(lambda record: seen.append(record.query))
            tx = conn.transaction()
            await tx.start()
            await conn.execute("SELECT set_config('application_name', 'leaked', true)")
        assert not any("RESET ALL" in q or "UNLISTEN" in q for q in seen), seen
        async with pool.acquire() as conn:
            assert conn._con is raw
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SHOW application_name") != "leaked"
    finally:
        await pool.close()
