"""What the index of inputs costs and serves, in each of its forms: sql/030's (every row), sql/040's
(only the rows whose input is not empty), and none. Figures printed.

    python benchmarks/input_index_bench.py [--jobs 20000] [--runs 3] [--table 300000]

On a private embedded PostgreSQL (durable settings), each measurement on a fresh database, the
forms interleaved run by run, medians shown:

* enqueue: one `enqueue_many` (by COPY) of N jobs with `{}` as input, and of N jobs with a web
  shop's order as input: jobs/s of the call, and the server's CPU per job (its backend's, from
  /proc, which holds on a busy machine where wall time does not);
* search: over a table of `--table` jobs, half with `{}` and half with an order each, the time of
  the console's input search `input.order_id:<n>` (its WHERE as `JobFilter.where` writes it),
  and whether the index served it.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.enqueue_bench import order_input
from benchmarks.harness import process_cpu_seconds
from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from jobdesk.store.search_syntax import parse_search
from tests import pg

GIN = "CREATE INDEX jobs_input_data_path_idx ON jobs USING gin (input_data jsonb_path_ops)"
FORMS = {"every row (sql/030)": GIN, "non-empty inputs only (sql/040)": GIN + " WHERE input_data <> '{}'::jsonb",
         "no index": None}
# sql/030's search clause, without the index's condition: what it was before sql/040.
OLD_WHERE = "input_data @> $1::text::jsonb"


async def with_form(server_dsn: str, form: str | None) -> tuple[str, asyncpg.Connection]:
    dsn = await pg.create_test_database(server_dsn)
    conn = await asyncpg.connect(dsn)
    await conn.execute("DROP INDEX jobs_input_data_path_idx")
    if form is not None:
        await conn.execute(form)
    return dsn, conn


async def enqueue(server_dsn: str, form: str | None, n: int, order: bool) -> tuple[float, float]:
    """jobs/s and the server's us of CPU per job of one enqueue_many of n jobs."""
    dsn, conn = await with_form(server_dsn, form)
    try:
        await transitions.enqueue(conn, [JobCreate("warm", {}) for _ in range(300)])  # warm, by COPY too
        jobs = [JobCreate("bench.noop", order_input(i) if order else {}, user_id=1) for i in range(n)]
        server0, t0 = process_cpu_seconds(conn.get_server_pid()), time.perf_counter()
        await transitions.enqueue(conn, jobs)
        took = time.perf_counter() - t0
        await asyncio.sleep(0.05)  # the backend's CPU ticks are counted
        return n / took, (process_cpu_seconds(conn.get_server_pid()) - server0) / n * 1e6
    finally:
        await conn.close()
        await pg.drop_test_database(dsn)


async def search(server_dsn: str, form: str | None, rows: int, runs: int) -> tuple[float, bool]:
    """Median ms of the input search over `rows` jobs, and whether the index served it."""
    dsn, conn = await with_form(server_dsn, form)
    try:
        await conn.execute("""INSERT INTO jobs (type, input_data, status)
                              SELECT 'bulk', CASE WHEN g % 2 = 0 THEN '{}'::jsonb ELSE jsonb_build_object(
                                  'order_id', g, 'user', jsonb_build_object('plan', 'pro'), 'lines', '[1, 2, 3]'::jsonb)
                                  END, 'completed' FROM generate_series(1, $1) g""", rows)
        await conn.execute("VACUUM ANALYZE jobs")
        params: list[object] = []
        where = parse_search(f"input.order_id:{rows // 2 + 1}").filter.where(params)
        if form == GIN:
            where = OLD_WHERE
        query = f"SELECT id FROM jobs WHERE {where}"
        plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {query}", *params))
        took = []
        for _ in range(runs):
            t0 = time.perf_counter()
            await conn.fetch(query, *params)
            took.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(took), "jobs_input_data_path_idx" in plan
    finally:
        await conn.close()
        await pg.drop_test_database(dsn)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--table", type=int, default=300_000)
    args = parser.parse_args()
    server, root = pg.start_server()
    try:
        server_dsn = server.dsn
        await pg.build_template(server_dsn)
        print(f"input index benchmark: enqueue_many of {args.jobs:,} jobs, {args.runs} runs interleaved, medians")
        found: dict[tuple[str, bool], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for name, form in FORMS.items():
                for order in (False, True):
                    found.setdefault((name, order), []).append(await enqueue(server_dsn, form, args.jobs, order))
        for (name, order), results in found.items():
            rate = statistics.median(r[0] for r in results)
            cpu = statistics.median(r[1] for r in results)
            print(f"  {name:<32} {'an order' if order else '{}':>8} each: {rate:9,.0f} jobs/s, "
                  f"server {cpu:5.1f} us/job", flush=True)
        print(f"input search over {args.table:,} jobs (half with '{{}}'), median of 5:")
        for name, form in FORMS.items():
            ms, used = await search(server_dsn, form, args.table, 5)
            print(f"  {name:<32} {ms:8.2f} ms{'' if used else ' (index not used)'}", flush=True)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
