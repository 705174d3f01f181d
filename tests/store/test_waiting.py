"""Why a queued job is waiting: one test per reason, through JobService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from jobdesk.core.models import JobCreate
from jobdesk.service.jobs import JobService
from jobdesk.store import transitions
from tests.helpers import run_cli


@pytest.fixture
async def service(dsn: str) -> AsyncIterator[JobService]:
    svc = await JobService.connect(dsn, pool_size=2)
    yield svc
    await svc.close()


async def add_worker(conn: asyncpg.Connection, worker_id: str, types: list[str], state: str = "running",
                     age_s: float = 0) -> None:
    await conn.execute("INSERT INTO workers (id, host, pid, concurrency, job_types, version, state, heartbeat_at) "
                       "VALUES ($1, 'h', 1, 4, $2, 't', $3, now() - make_interval(secs => $4))",
                       worker_id, types, state, age_s)


async def reason(service: JobService, job_id: str) -> tuple[str, str]:
    why = await service.waiting_reason(job_id)
    assert why is not None
    detail = await service.job_detail(job_id)
    assert detail.waiting_reason == why.text
    return why.kind, why.text


async def test_dependencies(service: JobService, conn: asyncpg.Connection) -> None:
    await add_worker(conn, "w", ["a"])
    await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('p1', 'a', '{}'), ('p2', 'a', '{}')")
    await conn.execute("INSERT INTO jobs (id, type, input_data, dependent_on_jobs) "
                       "VALUES ('c', 'a', '{}', '[\"p1\", \"p2\"]')")
    why = await service.waiting_reason("c")
    assert why is not None and why.kind == "dependencies" and why.dependencies == ["p1", "p2"]
    assert why.text == "waiting for 2 dependencies: p1, p2"


async def test_scheduled(service: JobService, conn: asyncpg.Connection) -> None:
    at = datetime.now(UTC) + timedelta(minutes=10)
    [job_id] = await transitions.enqueue(conn, [JobCreate("a", {}, scheduled_at=at)])
    kind, text = await reason(service, job_id)
    assert kind == "scheduled" and text.startswith(f"scheduled for {at:%Y-%m-%d %H:%M:%S} UTC (in ")


async def test_retrying(service: JobService, conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, retry_count, next_retry_at) "
                       "VALUES ('r', 'a', '{}', 2, now() + interval '1 hour')")
    kind, text = await reason(service, "r")
    assert kind == "retrying" and text.startswith("retrying at ") and text.endswith("(retry 2)")


async def test_no_live_worker(service: JobService, conn: asyncpg.Connection) -> None:
    await add_worker(conn, "old", ["a"], age_s=3600)  # its heartbeat is far past the lease
    await add_worker(conn, "other", ["b"])
    [job_id] = await transitions.enqueue(conn, [JobCreate("a", {})])
    assert await reason(service, job_id) == ("no_worker", "no live worker serves a")


async def test_every_worker_paused(service: JobService, conn: asyncpg.Connection) -> None:
    await add_worker(conn, "w1", ["a"], state="paused")
    await add_worker(conn, "w2", ["a", "b"], state="paused")
    [job_id] = await transitions.enqueue(conn, [JobCreate("a", {})])
    assert await reason(service, job_id) == ("paused", "every worker that serves a is paused (2)")


async def test_the_one_worker_paused(service: JobService, conn: asyncpg.Connection) -> None:
    await add_worker(conn, "w1", ["a"], state="paused")
    [job_id] = await transitions.enqueue(conn, [JobCreate("a", {})])
    assert await reason(service, job_id) == ("paused", "the worker is paused (the one live worker that serves a)")


async def test_type_limit_reached(service: JobService, conn: asyncpg.Connection) -> None:
    await add_worker(conn, "w", ["a"])
    await conn.execute("INSERT INTO type_limits (type, max_running) VALUES ('a', 2)")
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, worker_id) VALUES "
                       "('x', 'a', '{}', 'in_progress', 'w'), ('y', 'a', '{}', 'in_progress', 'w')")
    [job_id] = await transitions.enqueue(conn, [JobCreate("a", {})])
    assert await reason(service, job_id) == ("type_limit", "type limit reached (2 of 2 running)")


async def test_ready(service: JobService, conn: asyncpg.Connection) -> None:
    await add_worker(conn, "w", ["a"])
    first, second = JobCreate("a", {}), JobCreate("a", {})
    await transitions.enqueue(conn, [first, second])
    assert await reason(service, first.id) == ("ready", "ready, next in line")
    assert await reason(service, second.id) == ("ready", "ready, 1 ahead in line")
    await conn.execute("UPDATE jobs SET status = 'completed' WHERE id = $1", first.id)
    assert await service.waiting_reason(first.id) is None
    assert (await service.job_detail(first.id)).waiting_reason is None


async def test_show_prints_it(conn: asyncpg.Connection, dsn: str) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("nobody.serves", {})])
    shown = run_cli("show", job_id, dsn=dsn).stdout
    assert "waiting  no live worker serves nobody.serves" in shown
