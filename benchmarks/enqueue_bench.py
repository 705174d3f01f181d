"""Enqueue benchmark: no-op jobs by plain SQL, one INSERT per row, and in a batch; independent,
then each depending on one of 100 jobs already there (a fan-out, as a pipeline's stage is).

    python benchmarks/enqueue_bench.py [--jobs 20000] [--runs 3] [--input order]
    python benchmarks/enqueue_bench.py --sizes [--runs 5]

On a private embedded PostgreSQL (durable settings), each measurement on a fresh database:

* per-row SQL: `INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs) VALUES (...)`
  for every job through asyncpg `executemany`, in one transaction, as a backend would write it
  (and as the peers' harness does with psycopg);
* batch: `JobClient.enqueue_many` with the same jobs (a large batch by COPY, see
  `jobdesk.store.transitions.copy_in`);
* raw COPY: the same rows by PostgreSQL's `COPY jobs (...) FROM STDIN` (asyncpg
  `copy_records_to_table`), the physical limit of a bulk insert into `jobs`: no ids, checks or
  answer of ours beyond what the table's defaults, constraints and triggers do. The last lines
  print `enqueue_many` as a share of it.

With `dependent_on_jobs`, each job is checked and counted against its parent, which is flagged
(the insert triggers): the same calls measure those. `enqueue_many` is measured twice more, for
what the features cost: every job with its own `unique_key` (the INSERT with `ON CONFLICT DO
NOTHING`, as a key may stand for a job already there), and a pipeline (`create_pipeline`: 100
roots in the batch, every other job depending on one of them).

`--input order` gives every job an input like a web shop's (an order id, a user with a plan, an
email, three lines), which the GIN index of inputs (sql/030) indexes path by path; the default
is the empty input of a no-op job.

`--sizes`: `enqueue_many` of 1 to 5,000 plain jobs by the INSERT and by COPY, the figures behind
`COPY_MIN_JOBS` (the smallest batch COPY takes).

`--cpu`: CPU per job instead of wall time, which a machine shared with other work moves much less:
the client's (this process) and the server's (the connection's backend, from /proc), for the same
calls on one connection (`transitions.enqueue` in a transaction, as `enqueue_many` makes it) and
for raw COPY. Median of the runs.

jobs/s = N / the time of the call, commit included, measured after connecting. Median of the runs.
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

from benchmarks.harness import process_cpu_seconds
from jobdesk.core.models import JobCreate
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from jobdesk.store import transitions
from jobdesk.store.db import connect
from jobdesk.store.transitions import copy_in
from tests import pg

INSERT = "INSERT INTO jobs (type, user_id, input_data, dependent_on_jobs) VALUES ($1, $2, $3::jsonb, $4::jsonb)"


PARENTS = [f"parent-{i}" for i in range(100)]
INPUT: dict[str, object] = {}  # what every job carries (`--input`)


def order_input(i: int) -> dict[str, object]:
    """A realistic input: an order of a user on a plan, with three lines."""
    return {"order_id": 100_000 + i, "user": {"id": i % 5000, "plan": ("free", "pro", "business")[i % 3]},
            "email": f"user{i % 5000}@example.com",
            "lines": [{"sku": f"sku-{(i + k) % 997}", "qty": 1 + k} for k in range(3)]}


def input_of(i: int) -> dict[str, object]:
    return order_input(i) if INPUT.get("order") else {}


async def add_parents(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("INSERT INTO jobs (id, type, input_data) SELECT unnest($1::text[]), 'bench.parent', '{}'",
                           PARENTS)
    finally:
        await conn.close()


def parent_of(i: int, dependent: bool) -> list[str]:
    return [PARENTS[i % len(PARENTS)]] if dependent else []


async def per_row(dsn: str, n: int, kind: str) -> float:
    dependent = kind == "dependent"
    conn = await asyncpg.connect(dsn)
    try:
        rows = [("bench.noop", 1, json.dumps(input_of(i)), json.dumps(parent_of(i, dependent))) for i in range(n)]
        t0 = time.perf_counter()
        async with conn.transaction():
            await conn.executemany(INSERT, rows)
        took = time.perf_counter() - t0
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'bench.noop'") == n
    finally:
        await conn.close()
    return n / took


async def raw_copy(dsn: str, n: int, kind: str) -> float:
    dependent = kind == "dependent"
    conn = await asyncpg.connect(dsn)
    try:
        rows = [("bench.noop", 1, json.dumps(input_of(i)), json.dumps(parent_of(i, dependent))) for i in range(n)]
        t0 = time.perf_counter()
        async with conn.transaction():
            await conn.copy_records_to_table("jobs", records=rows,
                                             columns=["type", "user_id", "input_data", "dependent_on_jobs"])
        took = time.perf_counter() - t0
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'bench.noop'") == n
    finally:
        await conn.close()
    return n / took


def batch_of(n: int, kind: str) -> list[JobCreate]:
    """The jobs of one `enqueue_many` call: plain, a dependency each, unique keys, or a pipeline."""
    if kind == "pipeline":
        roots = [JobCreate("bench.noop", input_of(i)) for i in range(len(PARENTS))]
        return roots + [JobCreate("bench.noop", input_of(i), dependent_on_jobs=[roots[i % len(roots)].id])
                        for i in range(len(roots), n)]
    return [JobCreate("bench.noop", input_of(i), dependent_on_jobs=parent_of(i, kind == "dependent"),
                      unique_key=f"key-{i}" if kind == "unique" else None) for i in range(n)]


async def batch(dsn: str, n: int, kind: str, *, warm: bool = False) -> float:
    """jobs/s of one call; `warm`: after a first call of the same size on the same client, as an
    application that enqueues often sees it (its statements prepared, its connections open)."""
    client = await JobService.connect(dsn, settings=load_settings(), pool_size=2)
    try:
        if warm:
            await client.enqueue_many(batch_of(n, kind))
        jobs = batch_of(n, kind)
        t0 = time.perf_counter()
        if kind == "pipeline":
            await client.create_pipeline(jobs)
        else:
            await client.enqueue_many(jobs)
        took = time.perf_counter() - t0
    finally:
        await client.close()
    return n / took


async def by_insert(dsn: str, n: int, kind: str) -> float:
    """`batch` with COPY turned off: the one INSERT that every batch took before COPY."""
    threshold, copy_in.COPY_MIN_JOBS = copy_in.COPY_MIN_JOBS, n + 1
    try:
        return await batch(dsn, n, kind)
    finally:
        copy_in.COPY_MIN_JOBS = threshold


async def sizes(server_dsn: str, runs: int) -> None:
    """Plain batches of each size by the INSERT and by COPY, each on a fresh database, warm."""
    threshold = copy_in.COPY_MIN_JOBS
    print(f"enqueue_many by size, median of {runs} (COPY_MIN_JOBS = {threshold})")
    try:
        for n in (1, 10, 50, 100, 200, 500, 1000, 5000):
            rates = {}
            for path, minimum in (("INSERT", n + 1), ("COPY", n)):
                copy_in.COPY_MIN_JOBS = minimum
                found = []
                for _ in range(runs):
                    dsn = await pg.create_test_database(server_dsn)
                    try:
                        found.append(await batch(dsn, n, "plain", warm=True))
                    finally:
                        await pg.drop_test_database(dsn)
                rates[path] = statistics.median(found)
            print(f"  {n:>5} jobs: INSERT {rates['INSERT']:9,.0f} jobs/s   COPY {rates['COPY']:9,.0f} jobs/s   "
                  f"COPY/INSERT {rates['COPY'] / rates['INSERT']:5.2f}", flush=True)
    finally:
        copy_in.COPY_MIN_JOBS = threshold


async def cpu_of(dsn: str, n: int, kind: str) -> tuple[float, float]:
    """(client, server) CPU microseconds per job of one call: `kind` as `batch_of`'s, or "raw"
    (raw COPY); with " by INSERT", COPY turned off."""
    conn = await (asyncpg.connect(dsn) if kind == "raw" else connect(dsn))
    threshold = copy_in.COPY_MIN_JOBS
    try:
        await conn.execute("SELECT 1")
        jobs = batch_of(n, "plain" if kind == "raw" else kind.removesuffix(" by INSERT"))
        rows = [("bench.noop", 1, json.dumps(input_of(i)), "[]") for i in range(n)]
        copy_in.COPY_MIN_JOBS = n + 1 if kind.endswith(" by INSERT") else threshold
        server0, client0 = process_cpu_seconds(conn.get_server_pid()), time.process_time()
        async with conn.transaction():
            if kind == "raw":
                await conn.copy_records_to_table("jobs", records=rows,
                                                 columns=["type", "user_id", "input_data", "dependent_on_jobs"])
            else:
                await transitions.enqueue(conn, jobs)
        client = time.process_time() - client0
        await asyncio.sleep(0.05)  # the backend's CPU ticks are counted
        server = process_cpu_seconds(conn.get_server_pid()) - server0
    finally:
        copy_in.COPY_MIN_JOBS = threshold
        await conn.close()
    return client / n * 1e6, server / n * 1e6


async def cpu(server_dsn: str, n: int, runs: int) -> None:
    kinds = {"raw COPY": "raw"}
    for kind, name in (("plain", "enqueue_many"), ("unique", "enqueue_many, a unique_key each"),
                       ("dependent", "enqueue_many, a dependency each"),
                       ("pipeline", "create_pipeline's jobs, 100 roots + fan-out")):
        kinds[f"{name} by COPY"], kinds[f"{name} by INSERT"] = kind, f"{kind} by INSERT"
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in kinds}
    for _ in range(runs):
        for name, kind in kinds.items():
            dsn = await pg.create_test_database(server_dsn)
            try:
                await add_parents(dsn)
                found[name].append(await cpu_of(dsn, n, kind))
            finally:
                await pg.drop_test_database(dsn)
    print(f"CPU per job, {n:,} jobs per call, median of {runs}:")
    for name, costs in found.items():
        client, server = (statistics.median(c[i] for c in costs) for i in (0, 1))
        print(f"  {name:<55} client {client:5.1f} us  server {server:5.1f} us  total {client + server:6.1f} us")


CASES = [("per-row SQL (executemany)", per_row, "plain"), ("JobClient.enqueue_many", batch, "plain"),
         ("raw COPY", raw_copy, "plain"),
         ("per-row SQL (executemany), a dependency each", per_row, "dependent"),
         ("JobClient.enqueue_many, a dependency each", batch, "dependent"),
         ("raw COPY, a dependency each", raw_copy, "dependent"),
         ("JobClient.enqueue_many, a unique_key each", batch, "unique"),
         ("JobClient.create_pipeline, 100 roots + fan-out", batch, "pipeline"),
         ("JobClient.enqueue_many by INSERT (no COPY)", by_insert, "plain")]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--input", choices=("empty", "order"), default="empty",
                        help="each job's input: {} (a no-op job's), or a web shop's order")
    parser.add_argument("--sizes", action="store_true", help="INSERT and COPY for batches of 1 to 5,000 jobs")
    parser.add_argument("--cpu", action="store_true", help="client and server CPU per job instead of jobs/s")
    args = parser.parse_args()
    INPUT["order"] = args.input == "order"
    server, root = pg.start_server()
    try:
        await pg.build_template(server.dsn)
        if args.sizes:
            await sizes(server.dsn, args.runs)
            return
        if args.cpu:
            await cpu(server.dsn, args.jobs, args.runs)
            return
        print(f"jobdesk enqueue benchmark: {args.jobs:,} no-op jobs per call, input {args.input}", flush=True)
        results: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
        for i in range(args.runs):
            for name, fn, kind in CASES:
                dsn = await pg.create_test_database(server.dsn)
                try:
                    await add_parents(dsn)
                    rate = await fn(dsn, args.jobs, kind)
                finally:
                    await pg.drop_test_database(dsn)
                results[name].append(rate)
                print(f"  run {i + 1} {name:<48} {rate:9,.0f} jobs/s", flush=True)
        medians = {name: statistics.median(rates) for name, rates in results.items()}
        for name, rate in medians.items():
            print(f"{name:<48} median {rate:9,.0f} jobs/s")
        for suffix in ("", ", a dependency each"):
            share = medians[f"JobClient.enqueue_many{suffix}"] / medians[f"raw COPY{suffix}"]
            print(f"enqueue_many / raw COPY{suffix:<24} {share:9.2f}")
        for name in CASES[6:]:
            share = medians[name[0]] / medians["JobClient.enqueue_many"]
            print(f"{name[0]:<48} / plain enqueue_many {share:5.2f}")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
