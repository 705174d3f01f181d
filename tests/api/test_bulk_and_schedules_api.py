"""POST /api/jobs/retry and /cancel by filter, GET /api/schedules and pausing and resuming."""

from __future__ import annotations

from jobdesk.core.models import JobCreate
from jobdesk.core.schedules import Schedule
from jobdesk.store.jobs import JobFilter
from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_error


async def fail(api: Api, ids: list[str]) -> None:
    await api.service.pool.execute("UPDATE jobs SET status = 'failed' WHERE id = ANY($1::text[])", ids)


async def test_retry_matching_counts_first_then_acts_in_chunks(api: Api) -> None:
    jobs = [JobCreate("pdf.render", {"n": i}) for i in range(5)] + [JobCreate("echo", {})]
    ids = await api.service.enqueue_many(jobs)
    await fail(api, ids)
    dry = (await api.client.post("/api/jobs/retry", json={"type": "pdf.render", "dry_run": True})).json()
    assert dry == {"action": "retry", "filter": "type pdf.render", "dry_run": True, "count": 5, "capped": False,
                   "changed": 0, "chunks": 0}
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs WHERE status = 'failed'") == 6
    done = (await api.client.post("/api/jobs/retry", json={"type": "pdf.render", "status": ["failed"]})).json()
    assert done["count"] == 5 and done["changed"] == 5 and done["chunks"] == 1 and not done["dry_run"]
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs WHERE status = 'failed'") == 1
    audit = await api.service.pool.fetch("SELECT action, actor FROM audit_log WHERE action = 'retry'")
    assert [(a["action"], a["actor"]) for a in audit] == [("retry", "admin")]


async def test_cancel_matching_and_its_errors(api: Api) -> None:
    await api.service.enqueue_many([JobCreate("echo", {}) for _ in range(3)])
    done = (await api.client.post("/api/jobs/cancel", json={})).json()
    assert done["count"] == 3 and done["changed"] == 3
    assert (await api.service.status_counts(JobFilter())).counts["cancelled"] == 3  # type: ignore[index]
    assert_error(await api.client.post("/api/jobs/cancel", json={"status": ["sleeping"]}), 422, "invalid")
    assert_error(await api.client.post("/api/jobs/cancel", json={"colour": "red"}), 422, "invalid")
    read_only = {"Authorization": f"Bearer {api.tokens['read']}"}
    assert_error(await api.client.post("/api/jobs/cancel", json={}, headers=read_only), 403, "forbidden")


async def test_a_users_bulk_action_reaches_only_that_users_jobs(api: Api) -> None:
    alice = api.service.as_actor(api.service.actor, user_id=2)
    mine = await alice.enqueue("echo", {})
    other = await api.service.enqueue("echo", {})
    done = (await api.client.post("/api/jobs/cancel", json={}, headers=api.auth("alice"))).json()
    assert done["count"] == 1
    assert (await api.service.get_job(mine)).status == "cancelled"
    assert (await api.service.get_job(other)).status == "queued"


async def test_schedules_list_pause_and_resume(api: Api) -> None:
    await api.service.add_schedule(Schedule(name="nightly", type="echo", cron="0 2 * * *", timezone="Europe/Berlin",
                                            input_data={"k": 1}))
    [listed] = (await api.client.get("/api/schedules")).json()
    assert listed["name"] == "nightly" and listed["expression"] == "0 2 * * *" and not listed["paused"]
    assert listed["timezone"] == "Europe/Berlin" and listed["next_run_at"].endswith("+00:00")
    paused = (await api.client.post("/api/schedules/nightly/pause")).json()
    assert paused["paused"] and paused["next_run_at"] is None
    resumed = (await api.client.post("/api/schedules/nightly/resume")).json()
    assert not resumed["paused"]
    assert_error(await api.client.post("/api/schedules/ghost/pause"), 404, "not_found")
    assert_error(await api.client.post("/api/schedules/nightly/pause", headers=api.auth("alice")), 403, "forbidden")
    read_only = {"Authorization": f"Bearer {api.tokens['read']}"}
    assert (await api.client.get("/api/schedules", headers=read_only)).status_code == 200
    assert_error(await api.client.post("/api/schedules/nightly/pause", headers=read_only), 403, "forbidden")
