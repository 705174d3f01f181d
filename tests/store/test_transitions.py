"""Operator actions and enqueue validation, straight against PostgreSQL."""

from __future__ import annotations

import asyncpg
import pytest

from jobdesk.core.errors import IllegalTransition, InvalidJob, JobNotFound
from jobdesk.core.models import JobCreate
from jobdesk.store import transitions

ACTOR = transitions.Actor("api", "tester")


async def status_of(conn: asyncpg.Connection, job_id: str) -> str:
    return await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)


async def set_status(conn: asyncpg.Connection, job_id: str, status: str) -> None:
    await conn.execute("UPDATE jobs SET status = $2 WHERE id = $1", job_id, status)


async def test_enqueue_defaults_to_the_default_user(conn: asyncpg.Connection) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("echo", {"x": 1})])
    row = await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)
    assert row["status"] == "queued"
    assert row["user_id"] == 1
    assert row["input_data"] == {"x": 1}
    assert row["retry_count"] == 0 and row["is_active"] is True


async def test_enqueue_refuses_unknown_dependency_and_writes_nothing(conn: asyncpg.Connection) -> None:
    with pytest.raises(InvalidJob, match="nope"):
        await transitions.enqueue(conn, [JobCreate("echo", {}), JobCreate("echo", {}, dependent_on_jobs=["nope"])])
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0


async def test_enqueue_refuses_a_cycle(conn: asyncpg.Connection) -> None:
    a, b, c = (JobCreate("echo", {}) for _ in range(3))
    a.dependent_on_jobs, b.dependent_on_jobs, c.dependent_on_jobs = [c.id], [a.id], [b.id]
    with pytest.raises(InvalidJob, match="cycle"):
        await transitions.enqueue(conn, [a, b, c])
    with pytest.raises(InvalidJob, match="itself"):
        await transitions.enqueue(conn, [JobCreate("echo", {}, id="x", dependent_on_jobs=["x"])])
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0


async def test_enqueue_refuses_duplicate_id_and_unknown_user(conn: asyncpg.Connection) -> None:
    await transitions.enqueue(conn, [JobCreate("echo", {}, id="same")])
    with pytest.raises(InvalidJob, match="already exists"):
        await transitions.enqueue(conn, [JobCreate("echo", {}, id="same")])
    with pytest.raises(InvalidJob, match="unknown user 999"):
        await transitions.enqueue(conn, [JobCreate("echo", {}, user_id=999)])
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 1


async def test_children_listed_before_parents_are_inserted_in_order(conn: asyncpg.Connection) -> None:
    parent = JobCreate("echo", {})
    child = JobCreate("echo", {}, dependent_on_jobs=[parent.id])
    await transitions.enqueue(conn, [child, parent])
    assert await conn.fetchval("SELECT pending_deps FROM jobs WHERE id = $1", child.id) == 1
    edges = await conn.fetch("SELECT job_id, depends_on_id FROM job_dependencies")
    assert [(e["job_id"], e["depends_on_id"]) for e in edges] == [(child.id, parent.id)]


async def test_cancel_queued_cascades_to_dependants(conn: asyncpg.Connection) -> None:
    a = JobCreate("echo", {})
    b = JobCreate("echo", {}, dependent_on_jobs=[a.id])
    c = JobCreate("echo", {}, dependent_on_jobs=[b.id])
    other = JobCreate("echo", {})
    await transitions.enqueue(conn, [a, b, c, other])
    changed = await transitions.cancel(conn, [a.id], ACTOR)
    assert set(changed) == {a.id, b.id, c.id}
    for job in (a, b, c):
        assert await status_of(conn, job.id) == "cancelled"
        assert await conn.fetchval("SELECT is_active FROM jobs WHERE id = $1", job.id) is False
    assert await status_of(conn, other.id) == "queued"
    audit = await conn.fetchrow("SELECT * FROM audit_log")
    assert audit["action"] == "cancel" and audit["job_ids"] == [a.id] and audit["os_user"] == "tester"


async def test_a_job_enqueued_after_its_dependency_was_cancelled_is_cancelled(conn: asyncpg.Connection) -> None:
    [a] = await transitions.enqueue(conn, [JobCreate("echo", {})])
    await transitions.cancel(conn, [a], ACTOR)
    [b] = await transitions.enqueue(conn, [JobCreate("echo", {}, dependent_on_jobs=[a])])
    assert await status_of(conn, b) == "cancelled"


async def test_cancel_waiting_approval(conn: asyncpg.Connection) -> None:
    [a] = await transitions.enqueue(conn, [JobCreate("echo", {})])
    await set_status(conn, a, "waiting_approval")
    await transitions.cancel(conn, [a], ACTOR)
    assert await status_of(conn, a) == "cancelled"


@pytest.mark.parametrize("start", ["failed", "cancelled"])
async def test_retry_requeues_and_keeps_history(conn: asyncpg.Connection, start: str) -> None:
    [a] = await transitions.enqueue(conn, [JobCreate("echo", {})])
    await conn.execute("UPDATE jobs SET status = $2, retry_count = 3, is_active = $3, error_message = 'boom' "
                       "WHERE id = $1", a, start, start != "cancelled")
    await conn.execute("INSERT INTO job_attempts (job_id, attempt, outcome, error_message) "
                       "VALUES ($1, 1, 'failed', 'boom')", a)
    await transitions.retry(conn, [a], ACTOR)
    row = await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", a)
    assert row["status"] == "queued" and row["retry_count"] == 0 and row["is_active"]
    assert row["error_message"] is None
    assert await conn.fetchval("SELECT count(*) FROM job_attempts WHERE job_id = $1", a) == 1


async def test_approve_completes_releases_dependants_and_creates_next_jobs(conn: asyncpg.Connection) -> None:
    a = JobCreate("echo", {})
    b = JobCreate("echo", {}, dependent_on_jobs=[a.id])
    await transitions.enqueue(conn, [a, b])
    later = JobCreate("echo", {"stage": "after approval"})
    await conn.execute("UPDATE jobs SET status = 'waiting_approval', result_data = '{\"draft\": 1}', "
                       "pending_next_jobs = $2 WHERE id = $1", a.id, [later.to_json()])
    await transitions.approve(conn, [a.id], ACTOR)
    row = await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", a.id)
    assert row["status"] == "completed" and row["completed_at"] is not None
    assert row["result_data"] == {"draft": 1}
    assert await conn.fetchval("SELECT pending_deps FROM jobs WHERE id = $1", b.id) == 0
    assert await conn.fetchval("SELECT input_data FROM jobs WHERE id = $1", later.id) == {"stage": "after approval"}


async def test_reject_fails_with_reason(conn: asyncpg.Connection) -> None:
    [a] = await transitions.enqueue(conn, [JobCreate("echo", {})])
    await set_status(conn, a, "waiting_approval")
    with pytest.raises(InvalidJob, match="reason"):
        await transitions.reject(conn, [a], "  ", ACTOR)
    await transitions.reject(conn, [a], "colours are off", ACTOR)
    row = await conn.fetchrow("SELECT status, error_message FROM jobs WHERE id = $1", a)
    assert row["status"] == "failed" and "colours are off" in row["error_message"]
    assert await conn.fetchval("SELECT reason FROM audit_log WHERE action = 'reject'") == "colours are off"


@pytest.mark.parametrize(("action", "status"), [
    ("approve", "completed"), ("approve", "queued"), ("reject", "failed"), ("retry", "queued"),
    ("retry", "completed"), ("retry", "in_progress"), ("cancel", "completed"), ("cancel", "failed"),
    ("cancel", "cancelled"),
])
async def test_illegal_transitions_change_nothing(conn: asyncpg.Connection, action: str, status: str) -> None:
    ok, bad = await transitions.enqueue(conn, [JobCreate("echo", {}), JobCreate("echo", {})])
    await set_status(conn, ok, "waiting_approval" if action != "retry" else "failed")
    await set_status(conn, bad, status)
    before = await conn.fetch("SELECT id, status, updated_at FROM jobs ORDER BY id")
    call = {"approve": lambda: transitions.approve(conn, [ok, bad], ACTOR),
            "reject": lambda: transitions.reject(conn, [ok, bad], "why", ACTOR),
            "retry": lambda: transitions.retry(conn, [ok, bad], ACTOR),
            "cancel": lambda: transitions.cancel(conn, [bad], ACTOR)}[action]
    with pytest.raises(IllegalTransition, match=f"cannot {action} job {bad}: it is {status}"):
        await call()
    assert await conn.fetch("SELECT id, status, updated_at FROM jobs ORDER BY id") == before
    assert await conn.fetchval("SELECT count(*) FROM audit_log") == 0


async def test_unknown_id_is_refused(conn: asyncpg.Connection) -> None:
    with pytest.raises(JobNotFound, match="no job with id missing"):
        await transitions.cancel(conn, ["missing"], ACTOR)


async def test_cancel_running_flags_it_for_its_worker(conn: asyncpg.Connection) -> None:
    [a] = await transitions.enqueue(conn, [JobCreate("sleep", {})])
    await conn.execute("UPDATE jobs SET status = 'in_progress', worker_id = 'w1', attempts = 1 WHERE id = $1", a)
    heard: list[str] = []
    await conn.add_listener(transitions.CONTROL_CHANNEL, lambda *args: heard.append(args[-1]))
    await transitions.cancel(conn, [a], ACTOR)
    row = await conn.fetchrow("SELECT status, is_active FROM jobs WHERE id = $1", a)
    assert row["status"] == "in_progress" and row["is_active"] is False
    await conn.execute("SELECT 1")
    assert heard and a in heard[0]


async def test_rescue_takes_back_a_lost_workers_jobs_at_once(conn: asyncpg.Connection) -> None:
    """A job claimed just before its worker died goes back when the worker is declared lost, not
    a lease later; a job whose worker never registered waits out the lease."""
    await conn.execute("INSERT INTO workers (id, host, pid, concurrency, job_types, version, state) "
                       "VALUES ('gone', 'h', 1, 1, '{echo}', '0', 'lost')")
    fresh, orphan, stale = (JobCreate("echo", {}) for _ in range(3))
    await transitions.enqueue(conn, [fresh, orphan, stale])
    await conn.execute("UPDATE jobs SET status = 'in_progress', attempts = 1, started_at = now(), "
                       "worker_id = CASE id WHEN $1 THEN 'gone' ELSE 'never-registered' END, "
                       "updated_at = CASE id WHEN $3 THEN now() - interval '1 hour' ELSE now() END "
                       "WHERE id = ANY(ARRAY[$1, $2, $3])", fresh.id, orphan.id, stale.id)
    rows = await transitions.rescue_lost_jobs(conn, "me", 30.0, [1.0])
    assert {(r["id"], r["lost_worker"]) for r in rows} == {(fresh.id, "gone"), (stale.id, "never-registered")}
    assert await status_of(conn, orphan.id) == "in_progress"
    assert await status_of(conn, fresh.id) == "queued"


@pytest.mark.parametrize(("input_data", "problem"), [
    ({"name": "a\x00b"}, "NUL character"), ({"k\x00": 1}, "NUL character"), ({"name": "\udad4"}, "unpaired surrogate")])
async def test_enqueue_refuses_json_postgresql_cannot_store(conn: asyncpg.Connection, input_data: dict[str, object],
                                                           problem: str) -> None:
    with pytest.raises(InvalidJob, match=f"input_data contains an? {problem}"):
        await transitions.enqueue(conn, [JobCreate("echo", {"fine": "\\u0000 as text is fine"}),
                                         JobCreate("echo", input_data)])
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0
    [job_id] = await transitions.enqueue(conn, [JobCreate("echo", {"fine": "\\u0000 as text", "é": "ü"})])
    assert await conn.fetchval("SELECT input_data FROM jobs WHERE id = $1", job_id) == {
        "fine": "\\u0000 as text", "é": "ü"}
