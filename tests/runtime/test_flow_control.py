"""Flow control across a fleet: three worker processes on the real PostgreSQL (and behind
PgBouncer in transaction mode) keep a rate limit in every one-second window, a rate per user,
one job per user at a time (within the type's own limit), fair share between users, and
gather a burst of enqueues with a debounce into one job. Starts are counted from `started_at`."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from tests.helpers import flow_workers, wait_for
from tests.pgbouncer import PgBouncer

FLEET = 3


async def add_users(conn: asyncpg.Connection, *ids: int) -> None:
    await conn.execute("INSERT INTO users (id, name) SELECT u, 'user ' || u FROM unnest($1::int[]) u "
                       "ON CONFLICT DO NOTHING", list(ids))


async def completed(conn: asyncpg.Connection, job_type: str, n: int, what: str, timeout: float = 20.0) -> None:
    """Wait until `n` jobs of the type have completed."""
    await wait_for(lambda: conn.fetchval("SELECT count(*) = $1 FROM jobs WHERE type = $2 AND status = 'completed'",
                                         n, job_type), timeout=timeout, what=what)


async def check_rate(conn: asyncpg.Connection, rate: int, seconds: float) -> int:
    """Jobs of flow.rate started from the first start on, for `seconds`: never more than `rate`
    in any one-second window. Returns how many started in that span."""
    await wait_for(lambda: conn.fetchval("SELECT count(*) > 0 FROM jobs WHERE type = 'flow.rate' "
                                         "AND started_at IS NOT NULL"), timeout=60, what="the first start")
    first = await conn.fetchval("SELECT min(started_at) FROM jobs WHERE type = 'flow.rate'")
    end = first + timedelta(seconds=seconds)
    await wait_for(lambda: conn.fetchval("SELECT now() > $1", end + timedelta(seconds=0.5)), timeout=seconds + 30,
                   what="the measured span")
    starts = [r["started_at"] for r in await conn.fetch(
        "SELECT started_at FROM jobs WHERE type = 'flow.rate' AND started_at >= $1 AND started_at < $2 "
        "ORDER BY started_at", first, end)]
    # Any window of one second holding rate + 1 starts holds some start and the rate-th after it.
    crowded = [(a, b) for a, b in zip(starts, starts[rate:], strict=False) if b - a < timedelta(seconds=1)]
    assert not crowded, f"{rate + 1} starts within a second: from {crowded[0][0]} to {crowded[0][1]}"
    return len(starts)


async def check_one_per_user(conn: asyncpg.Connection, users: list[int]) -> None:
    """No two flow.user jobs of one user ran at once, and jobs of different users did."""
    rows = await conn.fetch("SELECT user_id, started_at, completed_at FROM jobs WHERE type = 'flow.user' "
                            "ORDER BY started_at")
    assert all(r["completed_at"] is not None for r in rows)
    for user in users:
        mine = [r for r in rows if r["user_id"] == user]
        for a, b in zip(mine, mine[1:], strict=False):
            assert b["started_at"] >= a["completed_at"], f"user {user} had two jobs running at once"
    overlaps = sum(1 for a in rows for b in rows if a["user_id"] < b["user_id"]
                   and a["started_at"] < b["completed_at"] and b["started_at"] < a["completed_at"])
    assert overlaps > 0, "jobs of different users never ran at the same time"


def most_at_once(rows: list[asyncpg.Record]) -> int:
    """The most of these jobs (started_at, completed_at) in progress at one time."""
    events = sorted([(r["started_at"], 1) for r in rows] + [(r["completed_at"], -1) for r in rows])
    now = most = 0
    for _, step in events:  # an end sorts before a start at the same instant
        now += step
        most = max(most, now)
    return most


async def check_user_rate(conn: asyncpg.Connection, users: list[int], rate: int) -> None:
    """No user started more than `rate` flow.urate jobs in any one-second window, and all the
    users together did (the rate is each user's, not the type's)."""
    rows = await conn.fetch("SELECT user_id, started_at FROM jobs WHERE type = 'flow.urate' AND started_at IS NOT NULL "
                            "ORDER BY started_at")
    for user in users:
        mine = [r["started_at"] for r in rows if r["user_id"] == user]
        crowded = [(a, b) for a, b in zip(mine, mine[rate:], strict=False) if b - a < timedelta(seconds=1)]
        assert not crowded, f"user {user}: {rate + 1} starts within a second, from {crowded[0][0]} to {crowded[0][1]}"
    every = [r["started_at"] for r in rows]
    assert any(b - a < timedelta(seconds=1) for a, b in zip(every, every[rate:], strict=False)), \
        f"never more than {rate} starts of all users within a second"


async def enqueue_fair_backlog(conn: asyncpg.Connection, a_jobs: int, b_jobs: int) -> None:
    await add_users(conn, 2, 3)
    await transitions.enqueue(conn, [JobCreate("flow.fair", {}, user_id=2) for _ in range(a_jobs)])
    await transitions.enqueue(conn, [JobCreate("flow.fair", {}, user_id=3) for _ in range(b_jobs)])


async def check_fair(conn: asyncpg.Connection, a_rank: int) -> None:
    """Every job of user 3 (who enqueued last) started before user 2's `a_rank`-th."""
    await wait_for(lambda: conn.fetchval(
        "SELECT count(*) >= $1 FROM jobs WHERE type = 'flow.fair' AND user_id = 2 AND started_at IS NOT NULL",
        a_rank), timeout=60, what=f"user 2's {a_rank} first jobs")
    b_last = await conn.fetchval("SELECT max(started_at) FROM jobs WHERE type = 'flow.fair' AND user_id = 3 "
                                 "HAVING count(started_at) = count(*)")
    a_nth = await conn.fetchval("SELECT started_at FROM jobs WHERE type = 'flow.fair' AND user_id = 2 "
                                "AND started_at IS NOT NULL ORDER BY started_at OFFSET $1 - 1 LIMIT 1", a_rank)
    assert b_last is not None, "user 3's jobs did not all start"
    assert b_last < a_nth


async def test_a_rate_limit_holds_in_every_second_across_three_workers(conn: asyncpg.Connection, dsn: str,
                                                                       tmp_path: Path) -> None:
    await transitions.enqueue(conn, [JobCreate("flow.rate", {}) for _ in range(400)] +
                              [JobCreate("flow.free", {}) for _ in range(50)])
    with flow_workers(dsn, tmp_path, FLEET, JOB_RATE_LIMITS="flow.rate=20/s"):
        started = await check_rate(conn, 20, 10)
        # A type without a limit beside it is not held back.
        await completed(conn, "flow.free", 50, "the unlimited jobs")
    assert started >= 180
    # The jobs held back stayed queued, none lost.
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE type = 'flow.rate' AND status NOT IN "
                               "('queued', 'completed')") == 0


async def test_one_job_per_user_at_a_time_while_users_run_in_parallel(conn: asyncpg.Connection, dsn: str,
                                                                      tmp_path: Path) -> None:
    users = [2, 3, 4, 5]
    await add_users(conn, *users)
    await transitions.enqueue(conn, [JobCreate("flow.user", {"seconds": 0.15}, user_id=u)
                                     for _ in range(5) for u in users])
    with flow_workers(dsn, tmp_path, FLEET, JOB_USER_LIMITS="flow.user=1"):
        await completed(conn, "flow.user", 20, "the 20 jobs", timeout=60)
    await check_one_per_user(conn, users)


async def test_a_rate_per_user_across_three_workers(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    users = [2, 3, 4]
    await add_users(conn, *users)
    await transitions.enqueue(conn, [JobCreate("flow.urate", {}, user_id=u) for _ in range(15) for u in users])
    with flow_workers(dsn, tmp_path, FLEET, JOB_USER_RATE_LIMITS="flow.urate=4/s"):
        await completed(conn, "flow.urate", 45, "the 45 jobs", timeout=90)
    await check_user_rate(conn, users, 4)


async def test_limits_per_user_combine_with_the_type_limit(conn: asyncpg.Connection, dsn: str,
                                                           tmp_path: Path) -> None:
    users = [2, 3, 4, 5]
    await add_users(conn, *users)
    await transitions.enqueue(conn, [JobCreate("flow.user", {"seconds": 0.15}, user_id=u)
                                     for _ in range(4) for u in users])
    with flow_workers(dsn, tmp_path, FLEET, JOB_USER_LIMITS="flow.user=1", JOB_TYPE_LIMITS="flow.user=2"):
        await completed(conn, "flow.user", 16, "the 16 jobs", timeout=90)
    await check_one_per_user(conn, users)
    rows = await conn.fetch("SELECT started_at, completed_at FROM jobs WHERE type = 'flow.user'")
    assert most_at_once(rows) == 2, "JOB_TYPE_LIMITS=flow.user=2 is the fleet's bound, and it was reached"


async def test_fifty_enqueues_of_a_key_in_a_second_run_once_on_three_workers(conn: asyncpg.Connection, dsn: str,
                                                                             tmp_path: Path) -> None:
    with flow_workers(dsn, tmp_path, FLEET):
        # The workers are up, and claim as soon as the job is due.
        await wait_for(lambda: conn.fetchval("SELECT count(*) = $1 FROM workers WHERE state = 'running'", FLEET),
                       timeout=60, what="the workers to start")
        ids: list[str] = []
        starts, ends = [], []
        for i in range(50):
            starts.append(time.monotonic())
            ids += await transitions.enqueue(conn, [JobCreate("flow.echo", {"n": i}, unique_key="inbox-7",
                                                              debounce=3)])
            ends.append(time.monotonic())
            await asyncio.sleep(0.015)  # spread over about a second
        # Each enqueue moves the start to its own time plus the debounce: the key stays one job as long
        # as no enqueue comes later than the debounce after the one before it.
        apart = max(end - start for start, end in zip(starts, ends[1:]))
        assert apart < 3, f"two enqueues {apart:.1f} s apart, more than the debounce: this check needs them closer"
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 0 FROM jobs WHERE status <> 'completed'"),
                       timeout=30, what="the debounced job")
    assert len(set(ids)) == 1
    rows = await conn.fetch("SELECT id, result_data, attempts FROM jobs")
    assert [(r["id"], r["result_data"], r["attempts"]) for r in rows] == [(ids[0], {"n": 49}, 1)]


async def test_fair_share_lets_a_small_user_through_a_big_backlog(conn: asyncpg.Connection, dsn: str,
                                                                  tmp_path: Path) -> None:
    await enqueue_fair_backlog(conn, 5000, 10)
    with flow_workers(dsn, tmp_path, FLEET, JOB_FAIR_SHARE="flow.fair"):
        await check_fair(conn, 100)


async def test_every_limit_behind_pgbouncer(conn: asyncpg.Connection, dsn: str, pgbouncer: PgBouncer,
                                            tmp_path: Path) -> None:
    pooled = pgbouncer.url(dsn, declared=False)
    users = [4, 5, 6]
    await add_users(conn, *users)
    await enqueue_fair_backlog(conn, 1000, 5)
    await transitions.enqueue(conn, [JobCreate("flow.rate", {}) for _ in range(100)] +
                              [JobCreate("flow.user", {"seconds": 0.1}, user_id=u) for _ in range(3) for u in users] +
                              [JobCreate("flow.urate", {}, user_id=u) for _ in range(6) for u in users])
    with flow_workers(pooled, tmp_path, FLEET, JOB_RATE_LIMITS="flow.rate=10/s", JOB_USER_LIMITS="flow.user=1",
               JOB_FAIR_SHARE="flow.fair", JOB_USER_RATE_LIMITS="flow.urate=2/s"):
        await check_fair(conn, 50)
        assert await check_rate(conn, 10, 3) >= 20
        await completed(conn, "flow.user", 9, "the per-user jobs", timeout=60)
        await completed(conn, "flow.urate", 18, "the per-user rate's jobs", timeout=60)
    await check_one_per_user(conn, users)
    await check_user_rate(conn, users, 2)


@pytest.mark.parametrize("setting, value", [("JOB_RATE_LIMITS", "flow.rate=10/d"),
                                            ("JOB_USER_RATE_LIMITS", "flow.rate=ten/s"),
                                            ("JOB_USER_LIMITS", "flow.user=0"),
                                            ("JOB_FAIR_SHARE", "*,flow.fair")])
def test_a_malformed_setting_is_one_line_naming_it(dsn: str, setting: str, value: str) -> None:
    from tests.helpers import run_cli

    done = run_cli("worker", "--processors", "flow_processors", dsn=dsn, timeout=60, **{setting: value})
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and setting in lines[0], done.stderr
    assert "Traceback" not in done.stderr
