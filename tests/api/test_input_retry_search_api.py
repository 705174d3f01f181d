"""POST /api/jobs/{id}/retry with a new input (checked against the input model the server
loaded), and GET /api/jobs?q= with input.PATH:VALUE terms."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from jobdesk.core.input_validation import make_validator
from jobdesk.core.settings import load_settings
from jobdesk.runtime.registry import load_processor_classes
from jobdesk.service.jobs import JobService
from tests.api.conftest import Api, serve
from tests.api.test_jobs_api import assert_error

GOOD_ORDER = {"customer": "acme", "lines": [{"sku": "a-1", "qty": 2}]}
OLD_ORDER = {"customer": "acme", "lines": [{"sku": "a-1", "qty": 0}]}


@pytest.fixture
async def typed_api(dsn: str) -> AsyncIterator[Api]:
    """The app with the input models of tests.typed_processors loaded, as `jobdesk api
    --processors` loads them; an admin token and one with the read scope only."""
    service = await JobService.connect(dsn, settings=load_settings(), pool_size=4)
    tokens = {"admin": await service.create_token("admin"), "read": await service.create_token("r", scopes=["read"])}
    validate = make_validator(load_processor_classes(["tests.typed_processors"]))
    async with serve(service, dsn, tokens, validate_input=validate) as served:
        yield served
    await service.close()


async def _failed(api: Api, input_data: dict[str, object], job_type: str = "test.invoice") -> str:
    return str(await api.service.pool.fetchval(
        "INSERT INTO jobs (type, input_data, status, error_message) VALUES ($1, $2::text::jsonb, 'failed', 'boom') "
        "RETURNING id", job_type, json.dumps(input_data)))


async def test_retry_with_a_new_input(typed_api: Api) -> None:
    api = typed_api
    job_id = await _failed(api, OLD_ORDER)
    resp = await api.client.post(f"/api/jobs/{job_id}/retry", json={"input_data": GOOD_ORDER})
    assert resp.status_code == 200, resp.text
    job = resp.json()
    assert job["status"] == "queued" and job["input_data"] == GOOD_ORDER and job["error_message"] is None
    audit = await api.service.pool.fetch("SELECT action, actor, job_ids, reason FROM audit_log ORDER BY id")
    assert [(a["action"], a["actor"], a["job_ids"]) for a in audit] == [("edit input", "admin", [job_id]),
                                                                        ("retry", "admin", [job_id])]
    assert json.loads(audit[0]["reason"]) == OLD_ORDER
    # Without a body, a retry keeps the input, as before.
    await api.service.pool.execute("UPDATE jobs SET status = 'cancelled' WHERE id = $1", job_id)
    again = (await api.client.post(f"/api/jobs/{job_id}/retry")).json()
    assert again["status"] == "queued" and again["input_data"] == GOOD_ORDER


async def test_a_bad_new_input_is_422_and_changes_nothing(typed_api: Api) -> None:
    api = typed_api
    job_id = await _failed(api, OLD_ORDER)
    path = f"/api/jobs/{job_id}/retry"
    bad = {"customer": "acme", "lines": [{"sku": "a-1", "qty": -1}]}
    err = assert_error(await api.client.post(path, json={"input_data": bad}), 422, "invalid")
    assert err["message"].startswith("body.input_data") and "input_data.lines[0].qty" in err["message"]
    err = assert_error(await api.client.post(path, json={"input_data": [1]}), 422, "invalid")
    assert err["message"].startswith("body.input_data")
    err = assert_error(await api.client.post(path, content=b"{not json", headers={"Content-Type": "application/json"}),
                       422, "invalid")
    err = assert_error(await api.client.post(path, json={"input_data": {}, "extra": 1}), 422, "invalid")
    nul = {"customer": "nul \u0000", "lines": []}
    err = assert_error(await api.client.post(path, json={"input_data": nul}), 422, "invalid")
    assert "NUL" in err["message"]
    assert_error(await api.client.post("/api/jobs/ghost/retry", json={"input_data": {}}), 404, "not_found")
    queued = await api.service.pool.fetchval("INSERT INTO jobs (type, input_data) VALUES ('x', '{}') RETURNING id")
    assert_error(await api.client.post(f"/api/jobs/{queued}/retry", json={"input_data": {}}), 409,
                 "illegal_transition")
    assert_error(await api.client.post(path, json={"input_data": GOOD_ORDER}, headers=api.auth("read")),
                 403, "forbidden")
    row = await api.service.pool.fetchrow("SELECT status, input_data::text FROM jobs WHERE id = $1", job_id)
    assert (row["status"], json.loads(row["input_data"])) == ("failed", OLD_ORDER)
    assert await api.service.pool.fetchval("SELECT count(*) FROM audit_log") == 0


async def test_search_by_input_path(api: Api) -> None:
    await api.service.pool.execute("""INSERT INTO jobs (id, type, input_data, status) VALUES
        ('n42', 'order', '{"order_id": 42, "user": {"plan": "business"}}', 'queued'),
        ('n420', 'order', '{"order_id": 420, "user": {"plan": "businessplus"}}', 'failed'),
        ('s42', 'order', '{"order_id": "42", "user": {"plan": "free plan"}}', 'queued'),
        ('t', 'order', '{"order_id": 7, "vip": true}', 'queued')""")

    async def ids(query: str, **params: str) -> list[str]:
        resp = await api.client.get("/api/jobs", params={"q": query, **params})
        assert resp.status_code == 200, resp.text
        return [j["id"] for j in resp.json()["items"]]

    assert await ids("input.order_id:42") == ["n42"]
    assert await ids('input.order_id:"42"') == ["s42"]
    assert await ids("input.user.plan:business") == ["n42"]
    assert await ids('input.user.plan:"free plan"') == ["s42"]
    assert await ids("input.vip:true") == ["t"]
    assert await ids("input.order_id:420", status="queued") == []
    assert await ids("status:failed input.user.plan:businessplus") == ["n420"]
    err = assert_error(await api.client.get("/api/jobs", params={"q": "input..plan:x"}), 422, "invalid")
    assert err["message"].startswith("query.q: input..plan: malformed path")
    err = assert_error(await api.client.get("/api/jobs", params={"q": "colour:red"}), 422, "invalid")
    assert "unknown key 'colour'" in err["message"]


async def test_a_users_token_searches_its_own_jobs(api: Api) -> None:
    await api.service.pool.execute("""INSERT INTO jobs (id, type, input_data, user_id) VALUES
        ('a', 'order', '{"k": 1}', 2), ('b', 'order', '{"k": 1}', 3)""")
    resp = await api.client.get("/api/jobs", params={"q": "input.k:1 user:3"}, headers=api.auth("alice"))
    assert resp.status_code == 200 and resp.json()["items"] == []
    resp = await api.client.get("/api/jobs", params={"q": "input.k:1"}, headers=api.auth("alice"))
    assert [j["id"] for j in resp.json()["items"]] == ["a"]
