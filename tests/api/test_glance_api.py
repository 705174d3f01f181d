"""Types and schedules at a glance over the HTTP API: GET /api/types with running, queued, the
limit and the last 5 minutes (from the rollup a real worker writes); GET /api/schedules with the
description and recent runs; POST /api/schedules/{name}/run (operate scope; 404, 403)."""

from __future__ import annotations

from jobdesk.core.schedules import Schedule
from jobdesk.processors.builtin import EchoProcessor
from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_error
from tests.helpers import RunningWorker, wait_for


async def test_types_at_a_glance(api: Api, dsn: str) -> None:
    for _ in range(3):
        assert (await api.client.post("/api/jobs", json={"type": "echo", "input_data": {}})).status_code == 201
    worker = RunningWorker(dsn, {"echo": EchoProcessor()}, JOB_TYPE_LIMITS="echo=4")
    await wait_for(lambda: api.service.pool.fetchval("SELECT count(*) = 3 FROM jobs WHERE status = 'completed'"),
                   what="the jobs to complete")
    await worker.stop()
    resp = await api.client.get("/api/types", headers=api.auth("read"))
    assert resp.status_code == 200, resp.text
    [echo] = [t for t in resp.json()["types"] if t["type"] == "echo"]
    assert (echo["running"], echo["queued"], echo["queued_capped"], echo["limit"]) == (0, 0, False, 4)
    assert len(echo["throughput"]) == len(echo["failed"]) == 60
    assert sum(echo["throughput"]) == 3 and sum(echo["failed"]) == 0


async def test_schedules_at_a_glance_and_run_now(api: Api) -> None:
    await api.service.add_schedule(Schedule(name="weekdays", type="echo", cron="0 9 * * 1-5"))
    before = (await api.client.get("/api/schedules")).json()[0]
    assert before["description"] == "At 09:00, Monday through Friday" and before["recent"] == []

    resp = await api.client.post("/api/schedules/weekdays/run", headers=api.auth("operate"))
    assert resp.status_code == 201, resp.text
    job_id = resp.json()["job_id"]
    assert resp.json()["schedule"] == "weekdays"
    [listed] = (await api.client.get("/api/schedules", headers=api.auth("read"))).json()
    assert listed["next_run_at"] == before["next_run_at"], "the next regular run does not move"
    [run] = listed["recent"]
    assert (run["job_id"], run["status"], run["manual"], run["started_at"], run["duration_s"]) == (
        job_id, "queued", True, None, None)
    row = await api.service.pool.fetchrow("SELECT actor, source, reason, job_ids FROM audit_log "
                                          "WHERE action = 'run-schedule'")
    assert (row["actor"], row["source"], row["reason"], row["job_ids"]) == ("operate", "api", "weekdays", [job_id])

    paused = (await api.client.post("/api/schedules/weekdays/pause")).json()
    assert paused["paused"] is True and [r["job_id"] for r in paused["recent"]] == [job_id]

    assert_error(await api.client.post("/api/schedules/ghost/run"), 404, "not_found")
    assert_error(await api.client.post("/api/schedules/weekdays/run", headers=api.auth("alice")), 403, "forbidden")
    assert_error(await api.client.post("/api/schedules/weekdays/run", headers=api.auth("read")), 403, "forbidden")
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs") == 1
