"""The claim of flow-controlled types, one statement at a time: rates as sliding logs, limits per
user, fair share with priorities, and types without flow control untouched."""

from __future__ import annotations

from collections import Counter

import asyncpg

from jobdesk.core.limits import ClaimLimits, FlowConfig, Rate
from jobdesk.core.models import JobCreate
from jobdesk.store import flow_limits, transitions

LIMITS = ClaimLimits(flow=frozenset({"t"}))


async def setup(conn: asyncpg.Connection, config: FlowConfig, jobs: dict[int, int]) -> None:
    await conn.execute("INSERT INTO users (id, name) SELECT u, 'u' || u FROM unnest($1::int[]) u "
                       "ON CONFLICT DO NOTHING", list(jobs))
    await flow_limits.declare(conn, {"t": config})
    await transitions.enqueue(conn, [JobCreate("t", {}, user_id=u) for u, n in jobs.items() for _ in range(n)])


async def claim(conn: asyncpg.Connection, n: int, held: dict[str, float] | None = None) -> list[int | None]:
    _, jobs = await transitions.complete_and_claim(conn, "w", ["t"], n, (), LIMITS, held=held)
    return [j.user_id for j in jobs]


async def test_a_rate_counts_every_start_of_its_period(conn: asyncpg.Connection) -> None:
    await setup(conn, FlowConfig(rate=Rate(3, 3600)), {1: 10})
    assert len(await claim(conn, 2)) == 2
    held: dict[str, float] = {}
    assert len(await claim(conn, 5, held)) == 1
    assert 3590 < held["t"] <= 3600
    assert await claim(conn, 5) == []


async def test_a_rate_per_user(conn: asyncpg.Connection) -> None:
    await setup(conn, FlowConfig(user_rate=Rate(2, 3600)), {2: 5, 3: 5})
    assert Counter(await claim(conn, 10)) == {2: 2, 3: 2}
    await conn.execute("INSERT INTO users (id, name) VALUES (4, 'u4')")
    await transitions.enqueue(conn, [JobCreate("t", {}, user_id=4)])
    assert await claim(conn, 10) == [4]


async def test_fair_share_within_limits_per_user(conn: asyncpg.Connection) -> None:
    await setup(conn, FlowConfig(user_max_running=2, fair_share=True), {2: 5, 3: 5, 4: 1})
    assert Counter(await claim(conn, 10)) == {2: 2, 3: 2, 4: 1}
    held: dict[str, float] = {}
    assert await claim(conn, 10, held) == [] and held["t"] == float("inf")


async def test_fair_share_takes_turns_across_claims_and_keeps_priorities(conn: asyncpg.Connection) -> None:
    await setup(conn, FlowConfig(fair_share=True), {2: 6, 3: 2})
    turns = [u for _ in range(4) for u in await claim(conn, 1)]
    assert turns == [2, 3, 2, 3]
    await transitions.enqueue(conn, [JobCreate("t", {}, user_id=2, priority=5)])
    assert await claim(conn, 1) == [2]  # a higher priority goes first, whoever's turn it is
    assert await claim(conn, 10) == [2, 2, 2, 2]


async def test_a_type_without_flow_control_keeps_its_statement(conn: asyncpg.Connection) -> None:
    await flow_limits.declare(conn, {"t": FlowConfig(fair_share=True)})
    await transitions.enqueue(conn, [JobCreate("free", {}) for _ in range(3)])
    _, jobs = await transitions.complete_and_claim(conn, "w", ["free"], 3, (), LIMITS)
    assert len(jobs) == 3
    assert "jobdesk_flow_pick" not in transitions.claim_statement(1)


async def test_fair_share_takes_each_users_jobs_oldest_first(conn: asyncpg.Connection) -> None:
    await setup(conn, FlowConfig(fair_share=True), {2: 0, 3: 0})
    ids = {u: await transitions.enqueue(conn, [JobCreate("t", {"n": i}, user_id=u) for i in range(4)]) for u in (2, 3)}
    for turn in range(2):  # two claims of two jobs: one job of each user, their oldest left, each time
        _, jobs = await transitions.complete_and_claim(conn, "w", ["t"], 2, (), LIMITS)
        assert {j.id for j in jobs} == {ids[2][turn], ids[3][turn]}
