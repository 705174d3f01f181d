"""The fault injectors. Each runs for its case's fault window and returns the moments (unix
time) of its fault events; what it observed besides (connections opened, backends cut) goes into
`Context.notes`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg

from benchmarks.chaos.cluster import Server, Workers
from benchmarks.chaos.driver import Driver, connect
from benchmarks.chaos.load import Producer
from jobdesk.store.db import CONNECTION_ERRORS

_TERMINATE = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
 WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
   AND coalesce(application_name, '') NOT LIKE 'chaos-%'"""


@dataclass
class Context:
    server: Server
    dsn: str
    workers: Workers
    producer: Producer
    driver: Driver
    window: float  # seconds the fault lasts
    capacity: float  # jobs/s the two workers can run at most
    period: float = 20.0  # seconds between repeated kills
    notes: dict[str, object] = field(default_factory=dict)
    restarts: list[float] = field(default_factory=list)  # moments the server went down
    sample: Callable[[str], Awaitable[None]] | None = None  # records dead tuples and sizes, labelled


Fault = Callable[[Context], Awaitable[list[float]]]


async def kill_workers(ctx: Context) -> list[float]:
    """SIGKILL to a worker (the two in turn) every `period` s; a new one starts 1 s later, as a
    service manager with Restart=always would."""
    events: list[float] = []
    end = time.time() + ctx.window
    names = sorted(ctx.workers.procs)
    while time.time() < end:
        name = names[len(events) % len(names)]
        events.append(time.time())
        ctx.workers.kill(name)
        await asyncio.sleep(1.0)
        ctx.workers.start(name)
        await asyncio.sleep(max(0.0, min(ctx.period - 1.0, end - time.time())))
    ctx.notes["kills"] = len(events)
    return events


async def restart_server(ctx: Context) -> list[float]:
    """A fast shutdown of PostgreSQL and a start, then the rest of the window."""
    t = time.time()
    ctx.restarts.append(t)
    await asyncio.to_thread(ctx.server.restart)
    ctx.notes["down_s"] = round(time.time() - t, 1)
    await asyncio.sleep(max(0.0, t + ctx.window - time.time()))
    return [t]


async def terminate_backends(ctx: Context) -> list[float]:
    """pg_terminate_backend of every jobdesk connection to the database, twice a second."""
    start = time.time()
    cut = 0
    while time.time() < start + ctx.window:
        tick = time.monotonic()
        cut += await ctx.driver.fetchval(_TERMINATE)
        await asyncio.sleep(max(0.0, 0.5 - (time.monotonic() - tick)))
    ctx.notes["backends_cut"] = cut
    return [start]


async def idle_connections(ctx: Context, n: int = 300) -> list[float]:
    """Open `n` connections that do nothing (as many as the server lets in: the rest are
    refused, "too many clients"), hold them for the window, close them."""
    start = time.time()
    held: list[asyncpg.Connection] = []
    refused = 0

    async def one() -> None:
        nonlocal refused
        try:
            held.append(await asyncpg.connect(ctx.dsn, server_settings={"application_name": "chaos-idle"},
                                              timeout=10))
        except CONNECTION_ERRORS:
            refused += 1

    for first in range(0, n, 50):
        await asyncio.gather(*(one() for _ in range(first, min(n, first + 50))))
    ctx.notes.update(idle_opened=len(held), idle_refused=refused)
    await asyncio.sleep(max(0.0, start + ctx.window - time.time()))
    for conn in held:
        with contextlib.suppress(*CONNECTION_ERRORS):
            await conn.close(timeout=5)
    return [start]


async def idle_transaction(ctx: Context) -> list[float]:
    """A REPEATABLE READ transaction that reads `jobs` once, then stays idle for the window: no
    row version deleted after its snapshot can be vacuumed away meanwhile."""
    conn = await connect(ctx.dsn)
    start = time.time()
    try:
        tx = conn.transaction(isolation="repeatable_read")
        await tx.start()
        await conn.fetchval("SELECT count(*) FROM jobs")
        steps = 5
        for step in range(1, steps + 1):
            await asyncio.sleep(max(0.0, start + ctx.window * step / steps - 1.0 - time.time()))
            if ctx.sample is not None:
                await ctx.sample(f"hold {round(time.time() - start)} s")
        await asyncio.sleep(max(0.0, start + ctx.window - time.time()))
        await tx.rollback()
    finally:
        await conn.close()
    return [start]


async def repeatable_read_readers(ctx: Context, n: int = 4) -> list[float]:
    """`n` connections, each scanning all of `jobs` in a REPEATABLE READ transaction, over and
    over, for the window."""
    start = time.time()
    scans = 0

    async def reader() -> None:
        nonlocal scans
        conn = await connect(ctx.dsn)
        try:
            while time.time() < start + ctx.window:
                async with conn.transaction(isolation="repeatable_read"):
                    await conn.fetchval("SELECT count(*) + sum(length(input_data::text)) FROM jobs")
                scans += 1
        finally:
            await conn.close()

    await asyncio.gather(*(reader() for _ in range(n)))
    ctx.notes["scans"] = scans
    return [start]


async def overload(ctx: Context) -> list[float]:
    """The producer at 1.5 times the workers' capacity for the window, then back to its rate."""
    start = time.time()
    rate = ctx.producer.rate
    ctx.producer.rate = 1.5 * ctx.capacity
    try:
        await asyncio.sleep(ctx.window)
    finally:
        ctx.producer.rate = rate
    ctx.notes["overload_rate"] = round(1.5 * ctx.capacity)
    return [start]
