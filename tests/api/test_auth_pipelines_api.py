"""Tokens and scopes, cross-user isolation, pipelines, idempotency, long-poll and system routes."""

from __future__ import annotations

import asyncio
import json
import time

from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_error


async def test_missing_wrong_and_revoked_tokens_are_401(api: Api) -> None:
    assert_error(await api.client.get("/api/jobs", headers={"Authorization": ""}), 401, "unauthorized")
    assert_error(await api.client.get("/api/jobs", headers={"Authorization": "Bearer nope"}), 401, "unauthorized")
    assert (await api.client.get("/api/jobs", headers=api.auth("read"))).status_code == 200
    await api.service.revoke_token("read")
    # The revocation reaches the app over NOTIFY, well before the cached answer expires (2 s).
    deadline = asyncio.get_running_loop().time() + 1.5
    while (answer := await api.client.get("/api/jobs", headers=api.auth("read"))).status_code == 200:
        assert asyncio.get_running_loop().time() < deadline, "the revoked token is still accepted"
        await asyncio.sleep(0.05)
    assert_error(answer, 401, "unauthorized")


async def test_scopes(api: Api) -> None:
    body = {"type": "t", "input_data": {}}
    assert_error(await api.client.post("/api/jobs", json=body, headers=api.auth("read")), 403, "forbidden")
    job = (await api.client.post("/api/jobs", json=body, headers=api.auth("submit"))).json()
    assert_error(await api.client.get(f"/api/jobs/{job['id']}", headers=api.auth("submit")), 403, "forbidden")
    assert_error(await api.client.post(f"/api/jobs/{job['id']}/approve", headers=api.auth("operate")), 403,
                 "forbidden")
    assert_error(await api.client.post(f"/api/jobs/{job['id']}/cancel", headers=api.auth("approve")), 403,
                 "forbidden")
    assert (await api.client.post(f"/api/jobs/{job['id']}/cancel", headers=api.auth("operate"))).status_code == 200


async def test_a_users_token_sees_only_that_users_jobs(api: Api) -> None:
    mine = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}, "user_id": 3},
                                  headers=api.auth("alice"))).json()
    assert mine["user_id"] == 2  # the token's user, whatever the body says
    theirs = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}},
                                    headers=api.auth("bob"))).json()
    assert_error(await api.client.get(f"/api/jobs/{theirs['id']}", headers=api.auth("alice")), 404, "not_found")
    assert_error(await api.client.post(f"/api/jobs/{theirs['id']}/cancel", headers=api.auth("alice")), 404,
                 "not_found")
    listed = (await api.client.get("/api/jobs", headers=api.auth("alice"))).json()["items"]
    assert [j["id"] for j in listed] == [mine["id"]]
    assert_error(await api.client.post("/api/jobs", json={"type": "t", "input_data": {},
                                                          "dependent_on_jobs": [theirs["id"]]},
                                       headers=api.auth("alice")), 404, "not_found")
    admin = (await api.client.get("/api/jobs")).json()["items"]
    assert len(admin) == 2


async def test_pipeline_create_step_indicator_cancel_and_retry(api: Api) -> None:
    body = {"jobs": [{"id": "a", "type": "script", "input_data": {"pipeline_name": "Video"}},
                     {"id": "c", "type": "video", "input_data": {}, "dependent_on_jobs": ["b", "a"]},
                     {"id": "b", "type": "voice", "input_data": {}, "dependent_on_jobs": ["a"]}]}
    resp = await api.client.post("/api/pipelines", json=body)
    assert resp.status_code == 201, resp.text
    created = resp.json()
    assert created["job_ids"] == ["a", "c", "b"]
    pid = created["pipeline_id"]
    view = (await api.client.get(f"/api/pipelines/{pid}")).json()
    assert view["name"] == "Video" and view["status"] == "running"
    assert view["progress"] == {"completed": 0, "total": 3}
    assert [j["id"] for j in view["jobs"]] == ["a", "b", "c"]  # dependency order
    assert_error(await api.client.get("/api/pipelines/nope"), 404, "not_found")
    answer = (await api.client.post(f"/api/pipelines/{pid}/cancel")).json()
    cancelled = answer["job_ids"]
    assert sorted(cancelled) == ["a", "b", "c"]
    # The jobs themselves too, after the action, in the order of the ids.
    assert [j["id"] for j in answer["jobs"]] == cancelled and {j["status"] for j in answer["jobs"]} == {"cancelled"}
    assert answer["jobs"][0] == {k: v for k, v in (await api.client.get(f"/api/jobs/{cancelled[0]}")).json().items()
                                 if k not in ("attempts", "steps", "progress", "waiting_reason")}
    assert (await api.client.get(f"/api/pipelines/{pid}")).json()["status"] == "cancelled"
    assert_error(await api.client.post(f"/api/pipelines/{pid}/cancel"), 409, "illegal_transition")
    answer = (await api.client.post(f"/api/pipelines/{pid}/retry-failed")).json()
    retried = answer["job_ids"]
    assert sorted(retried) == ["a", "b", "c"]
    assert [j["id"] for j in answer["jobs"]] == retried and {j["status"] for j in answer["jobs"]} == {"queued"}
    assert_error(await api.client.post("/api/pipelines/nope/retry-failed"), 404, "not_found")


async def test_pipeline_errors_name_the_job_in_the_body(api: Api) -> None:
    cyc = {"jobs": [{"id": "x", "type": "t", "input_data": {}, "dependent_on_jobs": ["y"]},
                    {"id": "y", "type": "t", "input_data": {}, "dependent_on_jobs": ["x"]}]}
    err = assert_error(await api.client.post("/api/pipelines", json=cyc), 422, "invalid")
    assert err["message"].startswith("body.jobs[") and "cycle" in err["message"]
    unknown = {"jobs": [{"id": "x", "type": "t", "input_data": {}},
                        {"id": "y", "type": "t", "input_data": {}, "dependent_on_jobs": ["ghost"]}]}
    err = assert_error(await api.client.post("/api/pipelines", json=unknown), 422, "invalid")
    assert err["message"].startswith("body.jobs[1].dependent_on_jobs")
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs") == 0  # all or nothing
    err = assert_error(await api.client.post("/api/pipelines", json={"jobs": [{"type": "t"}]}), 422, "invalid")
    assert err["message"].startswith("body.jobs[0].input_data")


async def test_pipeline_jobs_take_priority_a_time_and_a_unique_key(api: Api) -> None:
    held = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}, "unique_key": "render-7"})).json()
    at = "2031-05-04T03:02:01+00:00"
    body = {"jobs": [{"id": "p1", "type": "t", "input_data": {}, "unique_key": "render-7"},
                     {"id": "p2", "type": "t", "input_data": {}, "dependent_on_jobs": ["p1"], "priority": 5,
                      "scheduled_at": at, "unique_key": "upload-7"}]}
    resp = await api.client.post("/api/pipelines", json=body)
    assert resp.status_code == 201, resp.text
    assert resp.json()["job_ids"] == [held["id"], "p2"]  # p1 was a duplicate: the holder stands for it
    p2 = (await api.client.get("/api/jobs/p2")).json()
    assert p2["dependent_on_jobs"] == [held["id"]]
    assert (p2["priority"], p2["scheduled_at"], p2["unique_key"]) == (5, at, "upload-7")
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs WHERE id = 'p1'") == 0
    err = assert_error(await api.client.post("/api/pipelines", json={"jobs": [
        {"type": "t", "input_data": {}, "scheduled_at": "2031-05-04T03:02:01"}]}), 422, "invalid")
    assert err["message"].startswith("body.jobs[0].scheduled_at")


async def test_idempotency_key(api: Api) -> None:
    body = {"type": "t", "input_data": {"n": 1}}
    first = await api.client.post("/api/jobs", json=body, headers={"Idempotency-Key": "k1"})
    again = await api.client.post("/api/jobs", json={"input_data": {"n": 1}, "type": "t"},
                                  headers={"Idempotency-Key": "k1"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs") == 1
    assert_error(await api.client.post("/api/jobs", json={"type": "t", "input_data": {"n": 2}},
                                       headers={"Idempotency-Key": "k1"}), 409, "idempotency_conflict")
    pipe = {"jobs": [{"type": "t", "input_data": {}}]}
    p1 = await api.client.post("/api/pipelines", json=pipe, headers={"Idempotency-Key": "p"})
    p2 = await api.client.post("/api/pipelines", json=pipe, headers={"Idempotency-Key": "p"})
    assert (p1.status_code, p2.status_code) == (201, 200) and p1.json() == p2.json()
    await api.service.pool.execute("UPDATE api_idempotency_keys SET created_at = now() - interval '25 hours'")
    fresh = await api.client.post("/api/jobs", json=body, headers={"Idempotency-Key": "k1"})
    assert fresh.status_code == 201 and fresh.json()["id"] != first.json()["id"]


async def test_long_poll_answers_within_a_second_of_a_change(api: Api) -> None:
    job = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}})).json()
    started = time.monotonic()
    waiting = asyncio.create_task(api.client.get(f"/api/jobs/{job['id']}?wait=10"))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    changed_at = time.monotonic()
    await api.service.pool.execute("UPDATE jobs SET status = 'in_progress' WHERE id = $1", job["id"])
    resp = await waiting
    assert resp.json()["status"] == "in_progress" and time.monotonic() - changed_at < 1.0
    quick = await api.client.get(f"/api/jobs/{job['id']}?wait=5&status=queued")
    assert quick.json()["status"] == "in_progress"  # already differs: answers at once
    timed = await api.client.get(f"/api/jobs/{job['id']}?wait=0.3")
    assert timed.status_code == 200 and time.monotonic() - started < 5
    assert_error(await api.client.get(f"/api/jobs/{job['id']}?wait=61"), 422, "invalid")


async def test_healthz_metrics_ping_and_docs(api: Api) -> None:
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    assert (await api.client.get("/api/ping")).json() == {"pong": True}
    await api.client.post("/api/jobs", json={"type": "metered", "input_data": {}})
    await api.client.get("/api/jobs/nope")
    text = (await api.client.get("/metrics")).text
    assert 'jobdesk_jobs{status="queued",type="metered"} 1.0' in text
    assert 'route="/api/jobs/{job_id}"' in text and 'status="404"' in text
    assert "jobdesk_api_request_duration_seconds_bucket" in text
    schema = (await api.client.get("/openapi.json")).json()
    assert "/api/jobs/{job_id}/events" in schema["paths"]
    assert (await api.client.get("/docs")).status_code == 200


async def test_sse_and_long_poll_follow_a_job_a_worker_runs(api: Api, dsn: str) -> None:
    """A real worker picks the job up and completes it: the stream shows each status within a
    second of the worker's commit, then ends; a long-poll answers with the change."""
    from jobdesk.processors.builtin import SleepProcessor
    from tests.helpers import RunningWorker

    job = (await api.client.post("/api/jobs", json={"type": "sleep", "input_data": {"seconds": 0.6}})).json()
    seen: list[tuple[float, str]] = []

    async def follow() -> None:
        async with api.client.stream("GET", f"/api/jobs/{job['id']}/events") as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: "):
                    seen.append((time.monotonic(), json.loads(line[6:])["status"]))

    stream = asyncio.create_task(follow())
    polled = asyncio.create_task(api.client.get(f"/api/jobs/{job['id']}?wait=20&status=queued"))
    await asyncio.sleep(0.3)
    worker = RunningWorker(dsn, {"sleep": SleepProcessor()})
    try:
        await asyncio.wait_for(stream, 20)
        assert (await polled).json()["status"] in ("in_progress", "completed")
    finally:
        await worker.stop()
    statuses = [s for _, s in seen]
    assert statuses[0] == "queued" and statuses[-1] == "completed" and "in_progress" in statuses
    async with api.service.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT started_at, completed_at FROM jobs WHERE id = $1", job["id"])
    done_at = next(t for t, s in seen if s == "completed")
    running_at = next(t for t, s in seen if s == "in_progress")
    ran_s = (row["completed_at"] - row["started_at"]).total_seconds()
    assert abs((done_at - running_at) - ran_s) < 1.0, "each change arrived within a second of its commit"
