"""type_controls (sql/029) on the real PostgreSQL: the settings a worker declares are the defaults,
a value an operator sets wins over them (also when a worker starts again) and clearing it puts
the setting back; a limit of 0 lets nothing start; the list says where each limit came from;
the pause is read by workers in one small statement."""

from __future__ import annotations

import asyncpg

from jobdesk.core.limits import ClaimLimits, FlowConfig, Rate
from jobdesk.core.models import JobCreate
from jobdesk.core.rules import Actor
from jobdesk.core.type_controls import LimitInForce
from jobdesk.store import flow_limits, transitions, type_controls, type_limits

ALICE = Actor("api", None, "alice")


async def in_force(conn: asyncpg.Connection, job_type: str) -> tuple[object, ...]:
    limit = await conn.fetchval("SELECT max_running FROM type_limits WHERE type = $1", job_type)
    flow = await conn.fetchrow("SELECT rate_max, extract(epoch FROM rate_period)::int AS rate_s, user_max_running "
                               "FROM flow_limits WHERE type = $1", job_type)
    return (limit, *(tuple(flow) if flow else (None, None, None)))


async def test_the_setting_is_the_default_and_the_operators_value_wins(conn: asyncpg.Connection) -> None:
    await type_limits.declare(conn, {"t": 5})
    await flow_limits.declare(conn, {"t": FlowConfig(rate=Rate(5, 1))})
    await type_controls.set_limits(conn, "t", {"limit": 2, "rate": Rate(10, 60), "user_limit": 1}, ALICE)
    assert await in_force(conn, "t") == (2, 10, 60, 1)
    # A worker that starts again with its settings does not put them over the operator's values.
    await type_limits.declare(conn, {"t": 5})
    await flow_limits.declare(conn, {"t": FlowConfig(rate=Rate(5, 1))})
    assert await in_force(conn, "t") == (2, 10, 60, 1)
    [record] = await type_controls.list_types(conn, "t")
    assert (record.limit("limit").value, record.limit("limit").source) == (2, "database (set by alice)")
    assert (record.limit("rate").value, record.limit("rate").source) == ("10/m", "database (set by alice)")
    # Cleared, each falls back to the setting, or to no limit where there is none.
    await type_controls.set_limits(conn, "t", {"rate": None, "user_limit": None}, ALICE)
    assert await in_force(conn, "t") == (2, 5, 1, None)
    [record] = await type_controls.list_types(conn, "t")
    assert (record.limit("rate").value, record.limit("rate").source) == ("5/s", "env JOB_RATE_LIMITS")
    assert record.limit("user_limit") == LimitInForce(None, None)
    await type_controls.set_limits(conn, "t", {}, ALICE, clear=True)
    assert await in_force(conn, "t") == (5, 5, 1, None)


async def test_without_a_setting_clearing_removes_the_limit(conn: asyncpg.Connection) -> None:
    await type_controls.set_limits(conn, "u", {"limit": 3, "user_rate": Rate(2, 1)}, ALICE)
    assert await conn.fetchval("SELECT user_rate_max FROM flow_limits WHERE type = 'u'") == 2
    await type_controls.set_limits(conn, "u", {}, ALICE, clear=True)
    assert await conn.fetchval("SELECT count(*) FROM type_limits WHERE type = 'u'") == 0
    assert await conn.fetchval("SELECT count(*) FROM flow_limits WHERE type = 'u'") == 0
    actions = [r["action"] for r in await conn.fetch("SELECT action FROM audit_log WHERE job_type = 'u' ORDER BY id")]
    assert actions == ["set-type-limits", "clear-type-limits"]


async def test_a_limit_of_zero_lets_nothing_start(conn: asyncpg.Connection) -> None:
    await transitions.enqueue(conn, [JobCreate("z", {}) for _ in range(3)])
    await type_controls.set_limits(conn, "z", {"limit": 0}, ALICE)
    _, jobs = await transitions.complete_and_claim(conn, "w1", ["z"], 10, limits=ClaimLimits(fleet=frozenset({"z"})))
    assert jobs == []
    await type_controls.set_limits(conn, "z", {"limit": 2}, ALICE)
    _, jobs = await transitions.complete_and_claim(conn, "w1", ["z"], 10, limits=ClaimLimits(fleet=frozenset({"z"})))
    assert len(jobs) == 2


async def test_the_paused_types_a_worker_reads(conn: asyncpg.Connection) -> None:
    empty = await type_controls.claim_controls(conn, ["a", "b"])
    assert empty.paused == frozenset() and empty.stamp is None
    await type_controls.pause(conn, "a", ALICE, "maintenance")
    await type_controls.pause(conn, "c", ALICE, None)  # not one of this worker's types
    paused = await type_controls.claim_controls(conn, ["a", "b"])
    assert paused.paused == {"a"} and paused.stamp is not None
    await type_controls.resume(conn, "a", ALICE)
    resumed = await type_controls.claim_controls(conn, ["a", "b"])
    assert resumed.paused == frozenset() and resumed.stamp is not None and resumed.stamp > paused.stamp
    [record] = await type_controls.list_types(conn, "c")
    assert record.paused and record.paused_by == "alice" and record.reason is None
