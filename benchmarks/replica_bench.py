"""What DATABASE_READ_URL takes off the primary (prints figures).

Against a primary and a streaming standby started from the embedded binaries
(tests/read_replica.py), the HTTP API app in-process (httpx over ASGI, 16 at a time) answers
`GET /api/jobs/{id}` for random jobs of 1,000, once without a read URL and once with it. For each
it prints GETs/s and the transactions the primary committed per GET (`pg_stat_database`): the
load a polling frontend puts on the primary. Then the console's fence (`fence_reads`) on a
caught-up standby: its median and p95 in ms.

    .venv/bin/python benchmarks/replica_bench.py [--gets 3000] [--rounds 3]

Shared machine: compare the two modes of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobdesk.api import create_app  # noqa: E402
from jobdesk.api.server import connect_service  # noqa: E402
from jobdesk.core.settings import load_settings  # noqa: E402
from tests.read_replica import replica_settings, start_pair  # noqa: E402
from tests.replication import Pair  # noqa: E402

JOBS = 1000
CONCURRENCY = 16


async def primary_commits(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"))


async def measure(pair: Pair, ids: list[str], gets: int, *, replica: bool) -> tuple[float, float]:
    """GETs/s, and the primary's transactions per GET."""
    settings = replica_settings(pair) if replica else load_settings(DATABASE_URL=pair.primary.dsn())
    service = await connect_service(settings, pool_size=CONCURRENCY)
    stats = await asyncpg.connect(pair.primary.dsn())
    try:
        app = create_app(service, pair.primary.dsn(), settings=settings, auth=False)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
                left = gets

                async def one_caller() -> None:
                    nonlocal left
                    while left > 0:
                        left -= 1
                        answer = await client.get(f"/api/jobs/{random.choice(ids)}")
                        assert answer.status_code == 200, answer.text

                await asyncio.gather(*(one_caller() for _ in range(CONCURRENCY)))  # warm-up
                left = gets
                await asyncio.sleep(0.5)  # let pg_stat_database's counters settle
                before = await primary_commits(stats)
                started = time.perf_counter()
                await asyncio.gather(*(one_caller() for _ in range(CONCURRENCY)))
                took = time.perf_counter() - started
                await asyncio.sleep(0.6)  # the stats are flushed at most every 0.5 s (PostgreSQL 15+)
                after = await primary_commits(stats)
        return gets / took, (after - before) / gets
    finally:
        await stats.close()
        await service.close()


async def fence_ms(pair: Pair, times: int = 200) -> list[float]:
    service = await connect_service(replica_settings(pair), pool_size=2)
    try:
        took = []
        for _ in range(times):
            started = time.perf_counter()
            assert await service.fence_reads(wait=0.5)
            took.append((time.perf_counter() - started) * 1000)
        return took
    finally:
        await service.close()


async def main(gets: int, rounds: int) -> None:
    pair = await asyncio.to_thread(start_pair)
    try:
        conn = await asyncpg.connect(pair.primary.dsn())
        ids = [r["id"] for r in await conn.fetch(
            "INSERT INTO jobs (type, input_data) SELECT 'echo', jsonb_build_object('n', n) "
            "FROM generate_series(1, $1) AS n RETURNING id", JOBS)]
        await conn.close()
        figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for n in range(rounds):
            for replica in (False, True):
                rate, per_get = await measure(pair, ids, gets, replica=replica)
                figures[replica].append((rate, per_get))
                print(f"round {n + 1} {'replica' if replica else 'primary'}: {rate:,.0f} GET/s, "
                      f"{per_get:.3f} primary transactions per GET")
        for replica in (False, True):
            rates = [r for r, _ in figures[replica]]
            loads = [p for _, p in figures[replica]]
            print(f"median {'with DATABASE_READ_URL   ' if replica else 'without DATABASE_READ_URL'}: "
                  f"{statistics.median(rates):,.0f} GET/s, {statistics.median(loads):.3f} primary transactions per GET")
        took = sorted(await fence_ms(pair))
        print(f"fence_reads on a caught-up standby: median {statistics.median(took):.2f} ms, "
              f"p95 {took[int(len(took) * 0.95)]:.2f} ms")
    finally:
        await asyncio.to_thread(pair.stop)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gets", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.gets, options.rounds))
