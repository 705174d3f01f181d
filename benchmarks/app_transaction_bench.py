"""What `connection=` costs: one job enqueued per application transaction (the application saves
a row, enqueues its job, commits), through the client's own pool and through the application's
connection on each driver.

    python benchmarks/app_transaction_bench.py [--transactions 2000]

On a private embedded PostgreSQL, one fresh database per way:

* pool: the application's transaction on its asyncpg connection, then `JobClient.enqueue` on the
  client's pool (two transactions: what an application had to do before `connection=`);
* asyncpg, psycopg async: `JobClient.enqueue(..., connection=conn)` inside the transaction;
* psycopg sync: `SyncJobClient.enqueue(..., connection=conn)` inside the transaction.

Prints transactions/s (each saves one row and enqueues one job, commit included) and the mean
time of one enqueue call.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import fresh_database, private_server
from jobdesk import JobClient, SyncJobClient
from tests import pg

TABLE = "CREATE TABLE orders (id int PRIMARY KEY)"
SAVE = "INSERT INTO orders (id) VALUES ($1)"


async def timed(call: Awaitable[object]) -> float:
    """Seconds spent awaiting `call`."""
    t = time.perf_counter()
    await call
    return time.perf_counter() - t


async def asyncpg_way(dsn: str, n: int, *, inside: bool) -> tuple[float, float]:
    """The application's transactions on its asyncpg connection; each job enqueued inside its
    transaction with `connection=` (`inside`), or after its commit on the client's pool."""
    async with await JobClient.connect(dsn) as jobs:
        app = await asyncpg.connect(dsn)
        spent, start = 0.0, time.perf_counter()
        for i in range(n):
            async with app.transaction():
                await app.execute(SAVE, i)
                if inside:
                    spent += await timed(jobs.enqueue("bench.confirm", {"order": i}, connection=app))
            if not inside:
                spent += await timed(jobs.enqueue("bench.confirm", {"order": i}))
        total = time.perf_counter() - start
        await app.close()
    return n / total, spent / n


async def psycopg_async_way(dsn: str, n: int) -> tuple[float, float]:
    import psycopg

    async with await JobClient.connect(dsn) as jobs:
        async with await psycopg.AsyncConnection.connect(dsn) as app:
            spent, start = 0.0, time.perf_counter()
            for i in range(n):
                await app.execute("INSERT INTO orders (id) VALUES (%s)", (i,))
                spent += await timed(jobs.enqueue("bench.confirm", {"order": i}, connection=app))
                await app.commit()
            total = time.perf_counter() - start
    return n / total, spent / n


def psycopg_sync_way(dsn: str, n: int) -> tuple[float, float]:
    import psycopg

    with SyncJobClient.connect(dsn) as jobs, psycopg.Connection.connect(dsn) as app:
        spent, start = 0.0, time.perf_counter()
        for i in range(n):
            app.execute("INSERT INTO orders (id) VALUES (%s)", (i,))
            t = time.perf_counter()
            jobs.enqueue("bench.confirm", {"order": i}, connection=app)
            spent += time.perf_counter() - t
            app.commit()
        total = time.perf_counter() - start
    return n / total, spent / n


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transactions", type=int, default=2000)
    n = parser.parse_args().transactions
    ways: list[tuple[str, Callable[[str, int], Awaitable[tuple[float, float]]]]] = [
        ("pool (two transactions)", functools.partial(asyncpg_way, inside=False)),
        ("asyncpg connection=", functools.partial(asyncpg_way, inside=True)),
        ("psycopg async connection=", psycopg_async_way),
        ("psycopg sync connection= (SyncJobClient)", lambda d, k: asyncio.to_thread(psycopg_sync_way, d, k)),
    ]
    with private_server() as server:
        await pg.build_template(server.dsn)
        print(f"{n} application transactions, each saving one row and enqueueing one job")
        print(f"{'way':<44}{'transactions/s':>16}{'enqueue call, ms':>18}")
        for name, way in ways:
            async with fresh_database(server.dsn) as dsn:
                conn = await asyncpg.connect(dsn)
                await conn.execute(TABLE)
                await conn.close()
                rate, per_call = await way(dsn, n)
                print(f"{name:<44}{rate:>16.0f}{per_call * 1000:>18.2f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
