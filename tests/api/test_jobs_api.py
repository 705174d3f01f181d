"""The job endpoints through the ASGI app: bodies, status codes and error bodies."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from tests.api.conftest import Api


def assert_error(resp, status: int, code: str) -> dict:  # type: ignore[no-untyped-def]
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and body["error"]["code"] == code and body["error"]["message"]
    assert "Traceback" not in resp.text
    return body["error"]


async def test_create_and_get_job(api: Api) -> None:
    resp = await api.client.post("/api/jobs", json={"type": "echo", "input_data": {"a": 1}, "priority": 3})
    assert resp.status_code == 201, resp.text
    job = resp.json()
    assert job["status"] == "queued" and job["priority"] == 3 and job["input_data"] == {"a": 1}
    got = (await api.client.get(f"/api/jobs/{job['id']}")).json()
    for column in ("id", "type", "status", "user_id", "pipeline_id", "input_data", "result_data", "error_message",
                   "dependent_on_jobs", "retry_count", "next_retry_at", "is_active", "created_at", "updated_at",
                   "completed_at", "attempts"):
        assert column in got
    assert got["attempts"] == [] and got["created_at"].endswith("+00:00")
    audit = await api.service.pool.fetchrow("SELECT action, actor, job_ids FROM audit_log ORDER BY id DESC LIMIT 1")
    assert (audit["action"], audit["actor"], audit["job_ids"]) == ("submit", "admin", [job["id"]])


async def test_unknown_job_is_404(api: Api) -> None:
    assert_error(await api.client.get("/api/jobs/nope"), 404, "not_found")
    assert_error(await api.client.post("/api/jobs/nope/cancel"), 404, "not_found")


async def test_malformed_bodies_are_422_with_the_field_path(api: Api) -> None:
    err = assert_error(await api.client.post("/api/jobs", json={"input_data": {}}), 422, "invalid")
    assert err["message"].startswith("body.type")
    err = assert_error(await api.client.post("/api/jobs", json={"type": "x", "input_data": [1]}), 422, "invalid")
    assert err["message"].startswith("body.input_data")
    err = assert_error(await api.client.post("/api/jobs", json={"type": "x", "input_data": {},
                                                                "dependent_on_jobs": ["ghost"]}), 422, "invalid")
    assert err["message"].startswith("body.dependent_on_jobs") and "ghost" in err["message"]
    err = assert_error(await api.client.post("/api/jobs", content=b"{not json",
                                             headers={"Content-Type": "application/json"}), 422, "invalid")
    err = assert_error(await api.client.get("/api/jobs?limit=501"), 422, "invalid")
    assert err["message"].startswith("query.limit")


async def test_body_over_the_limit_is_413(api: Api) -> None:
    big = {"type": "x", "input_data": {"blob": "x" * 5000}}
    assert_error(await api.client.post("/api/jobs", json=big), 413, "payload_too_large")

    async def streamed() -> AsyncIterator[bytes]:  # no Content-Length: the limit counts as it reads
        yield b'{"type": "x", "input_data": {"blob": "'
        for _ in range(5):
            yield b"x" * 1000
        yield b'"}}'

    for path in ("/api/jobs", "/api/pipelines", f"/api/jobs/{uuid.uuid4()}/reject"):
        answer = await api.client.post(path, content=streamed(), headers={"Content-Type": "application/json"})
        assert_error(answer, 413, "payload_too_large")
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs") == 0


async def test_list_pages_newest_first_with_repeated_status(api: Api) -> None:
    ids = [(await api.client.post("/api/jobs", json={"type": "t", "input_data": {"i": i}})).json()["id"]
           for i in range(5)]
    await api.service.pool.execute("UPDATE jobs SET status = 'failed' WHERE id = $1", ids[0])
    page = (await api.client.get("/api/jobs?limit=2")).json()
    assert [j["id"] for j in page["items"]] == ids[::-1][:2]
    rest = (await api.client.get(f"/api/jobs?limit=10&cursor={page['next_cursor']}")).json()
    assert [j["id"] for j in rest["items"]] == ids[::-1][2:] and rest["next_cursor"] is None
    both = (await api.client.get("/api/jobs?status=failed&status=queued&limit=500")).json()
    assert len(both["items"]) == 5
    failed = (await api.client.get("/api/jobs?status=failed&type=t")).json()
    assert [j["id"] for j in failed["items"]] == [ids[0]]
    assert_error(await api.client.get("/api/jobs?cursor=abc"), 422, "invalid")


async def test_actions_and_409_naming_the_status(api: Api) -> None:
    job = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}})).json()
    err = assert_error(await api.client.post(f"/api/jobs/{job['id']}/retry"), 409, "illegal_transition")
    assert "queued" in err["message"]
    cancelled = (await api.client.post(f"/api/jobs/{job['id']}/cancel")).json()
    assert cancelled["status"] == "cancelled"
    assert (await api.client.post(f"/api/jobs/{job['id']}/retry")).json()["status"] == "queued"
    await api.service.pool.execute("UPDATE jobs SET status = 'waiting_approval' WHERE id = $1", job["id"])
    assert (await api.client.post(f"/api/jobs/{job['id']}/approve")).json()["status"] == "completed"
    other = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}})).json()
    await api.service.pool.execute("UPDATE jobs SET status = 'waiting_approval' WHERE id = $1", other["id"])
    assert_error(await api.client.post(f"/api/jobs/{other['id']}/reject", json={}), 422, "invalid")
    rejected = (await api.client.post(f"/api/jobs/{other['id']}/reject", json={"reason": "no"})).json()
    assert rejected["status"] == "failed" and rejected["error_message"] == "rejected: no"
    actors = await api.service.pool.fetch("SELECT action, actor FROM audit_log WHERE action <> 'submit' ORDER BY id")
    assert [(a["action"], a["actor"]) for a in actors] == [("cancel", "admin"), ("retry", "admin"),
                                                           ("approve", "admin"), ("reject", "admin")]


async def test_concurrent_posts_are_grouped_and_each_gets_its_answer(api: Api) -> None:
    import asyncio

    bodies = [{"type": "t", "input_data": {"i": i}} for i in range(40)]
    bodies[7]["user_id"] = 999  # unknown user: only this request fails
    resps = await asyncio.gather(*(api.client.post("/api/jobs", json=b) for b in bodies))
    assert [r.status_code for r in resps].count(201) == 39
    assert_error(resps[7], 422, "invalid")
    assert {r.json()["input_data"]["i"] for r in resps if r.status_code == 201} == set(range(40)) - {7}


async def test_routing_answers_unknown_paths_wrong_methods_and_trailing_slashes(api: Api) -> None:
    """The routes sit flat in the app's list, cheapest first: a path that no route has, a method
    that its route does not take and a trailing slash get the same answers as ever."""
    assert_error(await api.client.get("/nope"), 404, "not_found")
    assert_error(await api.client.get("/api/jobs/a/b/c"), 404, "not_found")
    wrong = await api.client.post("/api/ping")
    assert_error(wrong, 405, "method_not_allowed")
    assert wrong.headers["allow"] == "GET"
    assert (await api.client.get("/api/jobs/x/cancel")).headers["allow"] == "POST"
    # A path that several routes share names every method they take, not the first route's.
    for path, allow in (("/api/jobs", "GET, POST"), ("/api/pipelines", "POST"), ("/api/jobs/x", "GET")):
        wrong = await api.client.put(path, json={})
        assert_error(wrong, 405, "method_not_allowed")
        assert wrong.headers["allow"] == allow, path
    slash = await api.client.get("/api/jobs/")
    assert slash.status_code == 307 and slash.headers["location"] == "http://api/api/jobs"
    for path in ("/api/ping", "/healthz", "/docs", "/openapi.json", "/api/schedules", "/api/jobs"):
        assert (await api.client.get(path)).status_code == 200, path
    assert (await api.client.post("/api/jobs/retry", json={"dry_run": True})).status_code == 200
