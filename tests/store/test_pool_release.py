"""A pooled connection goes back to the pool without asyncpg's session-reset round trip, and
still without an open transaction or a transaction-local setting."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from jobdesk.store.db import create_pool


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


async def test_connections_go_to_callers_in_the_order_they_asked(dsn: str) -> None:
    """A caller that arrives just as a connection comes back queues behind those already
    waiting (asyncpg's own queue lets such a newcomer take the connection first)."""
    pool = await create_pool(dsn, size=1)
    try:
        order: list[str] = []

        async def use(name: str, after: asyncio.Event | None = None) -> None:
            if after is not None:
                await after.wait()
            async with pool.acquire() as conn:
                order.append(name)
                await conn.fetchval("SELECT 1")

        first = await pool.acquire()
        waiting = [asyncio.create_task(use(name)) for name in ("b", "c")]
        arrives = asyncio.Event()
        late = asyncio.create_task(use("late", arrives))
        await asyncio.sleep(0.05)  # b and c wait for the connection, late for its moment
        queue = pool._queue
        put_back = queue.put_nowait

        def coming_back(holder: object) -> None:
            # The newcomer becomes ready to run just before the waiters are woken, as a request
            # read from the network in the same loop iteration would be.
            arrives.set()
            put_back(holder)

        queue.put_nowait = coming_back  # type: ignore[method-assign]
        await pool.release(first)
        await asyncio.gather(*waiting, late)
        assert order == ["b", "c", "late"]
        queue.put_nowait = put_back  # type: ignore[method-assign]
        await pool.release(first)  # a second release of the same connection gives back no extra turn
        held = await pool.acquire()
        other = asyncio.create_task(use("other"))
        await asyncio.sleep(0.05)
        assert not other.done()
        await pool.release(held)
        await other
    finally:
        await pool.close()


BROKEN = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)


async def test_a_connection_lost_while_lent_gives_its_turn_back(dsn: str) -> None:
    """A connection the server drops while it is lent out goes back to asyncpg's queue on its
    own; the pool's turn for it must come back too, or every outage would shrink the pool until
    callers wait forever."""
    pool = await create_pool(dsn, size=2)
    admin = await asyncpg.connect(dsn)
    try:
        for _ in range(3):  # more losses than the pool has connections
            async with pool.acquire(timeout=5) as conn:  # a lost turn would make this wait forever
                pid = await conn.fetchval("SELECT pg_backend_pid()")
                await admin.execute("SELECT pg_terminate_backend($1)", pid)
                await asyncio.sleep(0.2)  # the server's goodbye reaches the client
                with pytest.raises(BROKEN):
                    await conn.fetchval("SELECT 1")

        async def use() -> int:
            async with pool.acquire() as conn:
                await asyncio.sleep(0.05)
                return int(await conn.fetchval("SELECT 1"))

        assert await asyncio.wait_for(asyncio.gather(use(), use()), 10) == [1, 1], "both turns are free"
    finally:
        await admin.close()
        await pool.close()
