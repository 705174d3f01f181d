"""The worker registry as operators read it: which workers count as lost, and which queued job
types no live worker serves."""

from __future__ import annotations

import asyncpg

from jobdesk.store import fleet


def test_a_worker_is_lost_when_declared_or_when_its_live_heartbeat_is_past_the_lease() -> None:
    assert fleet.is_lost("lost", 0, 30)
    for state in fleet.LIVE_STATES:
        assert fleet.is_lost(state, 31, 30)
        assert not fleet.is_lost(state, 29, 30)
    assert not fleet.is_lost("stopped", 3600, 30), "a worker that stopped cleanly is not lost"


async def add_worker(conn: asyncpg.Connection, worker_id: str, types: list[str], *, state: str = "running",
                     age_s: float = 0) -> None:
    await conn.execute("INSERT INTO workers (id, host, pid, concurrency, job_types, version, state, heartbeat_at) "
                       "VALUES ($1, 'h', 1, 1, $2, 'x', $3, now() - make_interval(secs => $4))",
                       worker_id, types, state, age_s)


async def test_unserved_types_are_the_queued_types_no_live_worker_serves(conn: asyncpg.Connection) -> None:
    for job_type, n in (("echo", 3), ("render", 2), ("email", 1), ("resize", 1)):
        for _ in range(n):
            await conn.execute("INSERT INTO jobs (type, input_data) VALUES ($1, '{}')", job_type)
    await conn.execute("INSERT INTO jobs (type, input_data, status) VALUES ('archive', '{}', 'failed')")
    await add_worker(conn, "live", ["echo"])
    await add_worker(conn, "paused", ["resize"], state="paused")
    await add_worker(conn, "stale", ["render"], age_s=120)  # past the lease: lost, though not declared
    await add_worker(conn, "gone", ["email"], state="stopped")

    found = await fleet.unserved_types(conn, lease_timeout_s=30)
    assert [(u.type, u.queued, u.capped) for u in found] == [("render", 2, False), ("email", 1, False)]

    capped = await fleet.unserved_types(conn, lease_timeout_s=30, cap=2)
    assert sum(u.queued for u in capped) == 2 and all(u.capped for u in capped)

    records = {w.id: w for w in await fleet.list_workers(conn)}
    assert records["stale"].is_lost(30) and not records["live"].is_lost(30)
