"""What each index of `jobs` costs the engine: PostgreSQL's CPU per job to enqueue and to run a
job, with every index, and with each one dropped in turn.

    python benchmarks/index_cost_bench.py [--jobs 10000] [--runs 3] [--input order] [--only INDEX]

On a private embedded PostgreSQL (durable settings), each measurement on a fresh database, the
variants interleaved run by run. Per job, the server's CPU time (its backend's user + system
time, read from /proc, so the figure holds on a busy machine where wall time does not):

* per-row INSERT: `INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs) VALUES (...)`
  once per job (asyncpg `executemany`, one transaction), as a backend writes it in plain SQL;
* set INSERT: one `INSERT INTO jobs ... SELECT FROM generate_series(...)` of all the jobs;
* claim + complete: the worker's own statement (`complete_and_claim`), 10 jobs a round, each
  round completing the previous round's jobs, until none is left.

Each measure starts after a warm-up of 100 jobs on the same connection. A variant's saving is
the baseline's figure minus its own; the medians are shown.

`--input order` gives every job a web shop's order as its input (an order id, a user with a plan,
an email, three lines) instead of `{}`: what the GIN index of inputs (sql/030) pays depends on
the paths an input holds. `--only INDEX` measures that index alone against every index.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.engine_bench import PER_ROW, insert_rows
from benchmarks.enqueue_bench import order_input
from benchmarks.harness import process_cpu_seconds
from jobdesk.core.models import ProcessorResult
from jobdesk.store.transitions.claim import complete_and_claim
from tests import pg

SET = ("INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs) "
       "SELECT 'bench.noop', 1, '{}'::jsonb, '[]'::jsonb FROM generate_series(1, $1)")
ORDER_SET = ("INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs) "
             "SELECT 'bench.noop', 1, jsonb_build_object("
             "'order_id', 100000 + g, 'user', jsonb_build_object('id', g % 5000, "
             "'plan', (ARRAY['free', 'pro', 'business'])[1 + g % 3]), 'email', 'user' || g % 5000 || '@example.com', "
             "'lines', (SELECT jsonb_agg(jsonb_build_object('sku', 'sku-' || (g + k) % 997, 'qty', 1 + k)) "
             "FROM generate_series(0, 2) k)), '[]'::jsonb FROM generate_series(1, $1) g")
INPUT: dict[str, bool] = {"order": False}  # `--input order`
MEASURES = ("per-row INSERT", "set INSERT", "claim + complete")


class Backend:
    """One connection, and the CPU time its server process has used."""

    def __init__(self, conn: asyncpg.Connection, pid: int) -> None:
        self.conn = conn
        self.pid = pid

    @classmethod
    async def connect(cls, dsn: str) -> Backend:
        # As the worker's connections: plans kept per connection stay on the indexes (see create_pool).
        conn = await asyncpg.connect(dsn, server_settings={"enable_seqscan": "off"})
        return cls(conn, await conn.fetchval("SELECT pg_backend_pid()"))

    def cpu_s(self) -> float:
        return process_cpu_seconds(self.pid)


async def per_row(b: Backend, n: int) -> None:
    if not INPUT["order"]:
        await insert_rows(b.conn, n)
        return
    async with b.conn.transaction():
        await b.conn.executemany(PER_ROW, [("bench.noop", 1, json.dumps(order_input(i)), "[]") for i in range(n)])


async def drain(b: Backend, n: int) -> None:
    """Claim and complete every queued job, 10 a round; `n` of them."""
    finished: list = []
    done = 0
    while True:
        written, jobs = await complete_and_claim(b.conn, "bench-index-cost", ["bench.noop"], 10,
                                                 [(job, ProcessorResult({})) for job in finished])
        done += len(written)
        if not jobs:
            break
        finished = jobs
    if done != n:
        raise SystemExit(f"the drain completed {done} of {n} jobs")


async def measure(dsn: str, drop: str | None, n: int) -> dict[str, float]:
    """µs of server CPU per job for each measure, with index `drop` dropped."""
    b = await Backend.connect(dsn)
    try:
        if drop is not None:
            await b.conn.execute(f"DROP INDEX {drop}")
        await per_row(b, 100)  # warm up: the catalog caches, the trigger functions, the plans
        await drain(b, 100)
        out = {}
        for name, step in (("per-row INSERT", lambda: per_row(b, n)),
                           ("set INSERT", lambda: b.conn.execute(ORDER_SET if INPUT["order"] else SET, n)),
                           ("claim + complete", lambda: drain(b, 2 * n))):
            before = b.cpu_s()
            await step()
            out[name] = (b.cpu_s() - before) / (2 * n if name == "claim + complete" else n) * 1e6
        return out
    finally:
        await b.conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--input", choices=("empty", "order"), default="empty",
                        help="each job's input: {} (a no-op job's), or a web shop's order")
    parser.add_argument("--only", metavar="INDEX", help="measure this index alone against every index")
    args = parser.parse_args()
    INPUT["order"] = args.input == "order"
    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        probe = await asyncpg.connect(pg.with_database(server.dsn, pg.TEMPLATE))
        indexes = [r["indexname"] for r in await probe.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'jobs' AND indexname <> 'jobs_pkey' ORDER BY 1")]
        await probe.close()
        if args.only:
            if args.only not in indexes:
                raise SystemExit(f"no index {args.only} on jobs; there are {', '.join(indexes)}")
            indexes = [args.only]
        variants: list[str | None] = [None, *indexes]
        print(f"jobdesk index cost: {args.jobs:,} jobs per measure, input {args.input}, {len(indexes)} "
              "index(es) measured besides the primary key; server CPU µs per job", flush=True)
        results: dict[str | None, list[dict[str, float]]] = {v: [] for v in variants}
        t0 = time.perf_counter()
        for i in range(args.runs):
            for v in variants:
                dsn = await pg.create_test_database(server.dsn)
                try:
                    results[v].append(await measure(dsn, v, args.jobs))
                finally:
                    await pg.drop_test_database(dsn)
            print(f"  run {i + 1} done ({time.perf_counter() - t0:.0f} s)", flush=True)
        med = {v: {m: statistics.median(r[m] for r in rs) for m in MEASURES} for v, rs in results.items()}
        base = med[None]
        print(f"{'':<32}" + "".join(f"{m:>20}" for m in MEASURES))
        print(f"{'every index':<32}" + "".join(f"{base[m]:17.1f} us" for m in MEASURES))
        for v in indexes:
            print(f"{'without ' + v:<32}" + "".join(f"{base[m] - med[v][m]:+17.1f} us" for m in MEASURES))
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
