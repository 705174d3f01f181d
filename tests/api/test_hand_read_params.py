"""The long-poll query and the Idempotency-Key header, which the hot routes read by hand: the
same 422 bodies, the same OpenAPI declarations, and the same behaviour as declared parameters."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI

from jobdesk.api import errors
from jobdesk.api.schemas import JobIn
from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_error


async def test_wait_and_status_are_validated_with_the_field_path(api: Api) -> None:
    job = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}})).json()
    err = assert_error(await api.client.get(f"/api/jobs/{job['id']}?wait=61"), 422, "invalid")
    assert err["message"].startswith("query.wait: "), err
    err = assert_error(await api.client.get(f"/api/jobs/{job['id']}?wait=soon"), 422, "invalid")
    assert err["message"].startswith("query.wait: "), err
    err = assert_error(await api.client.get(f"/api/jobs/{job['id']}?wait=1&status=sleeping"), 422, "invalid")
    assert err["message"].startswith("query.status: "), err
    # Other query parameters are ignored, as before; no wait is the plain GET.
    plain = await api.client.get(f"/api/jobs/{job['id']}?other=1&wait=0")
    assert plain.status_code == 200 and plain.json()["id"] == job["id"]


async def test_wait_with_a_status_answers_at_once_when_it_differs(api: Api) -> None:
    job = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}})).json()
    started = asyncio.get_running_loop().time()
    resp = await api.client.get(f"/api/jobs/{job['id']}?wait=5&status=in_progress")
    assert resp.status_code == 200 and resp.json()["status"] == "queued"
    assert asyncio.get_running_loop().time() - started < 2
    held = await api.client.get(f"/api/jobs/{job['id']}?wait=0.3")  # no change: held, then answered
    assert held.status_code == 200 and held.json()["status"] == "queued"
    assert asyncio.get_running_loop().time() - started >= 0.3


async def test_a_too_long_idempotency_key_is_422_naming_the_header(api: Api) -> None:
    body = {"type": "t", "input_data": {}}
    err = assert_error(await api.client.post("/api/jobs", json=body, headers={"Idempotency-Key": "k" * 256}),
                       422, "invalid")
    assert err["message"].startswith("header.idempotency-key: "), err
    first = await api.client.post("/api/jobs", json=body, headers={"Idempotency-Key": "k" * 255})
    again = await api.client.post("/api/jobs", json=body, headers={"Idempotency-Key": "k" * 255})
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]


async def test_openapi_still_declares_the_hand_read_parameters(api: Api) -> None:
    paths = (await api.client.get("/openapi.json")).json()["paths"]
    get = {p["name"]: p for p in paths["/api/jobs/{job_id}"]["get"]["parameters"]}
    assert set(get) == {"job_id", "wait", "status"}
    assert get["wait"]["in"] == "query" and get["wait"]["schema"]["anyOf"][0] == {
        "type": "number", "maximum": 60, "minimum": 0}
    assert get["status"]["schema"]["anyOf"][0] == {"$ref": "#/components/schemas/Status"}
    [key] = paths["/api/jobs"]["post"]["parameters"]
    assert key["name"] == "idempotency-key" and key["in"] == "header"
    assert key["schema"]["anyOf"][0] == {"type": "string", "maxLength": 255}


async def test_openapi_declares_the_bearer_scheme_on_guarded_routes_only(api: Api) -> None:
    doc = (await api.client.get("/openapi.json")).json()
    assert doc["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http", "scheme": "bearer", "description": "A token from `jobdesk token create`."}
    security = {(method, path): op.get("security") for path, ops in doc["paths"].items()
                for method, op in ops.items()}
    assert security[("get", "/api/jobs/{job_id}")] == [{"HTTPBearer": []}]
    assert security[("post", "/api/pipelines/{pipeline_id}/retry-failed")] == [{"HTTPBearer": []}]
    assert security[("get", "/api/schedules")] == [{"HTTPBearer": []}]
    assert security[("get", "/healthz")] is None and security[("get", "/api/ping")] is None
    guarded = [k for k, v in security.items() if v]
    assert len(guarded) == len(security) - 3  # all but /healthz, /metrics and /api/ping


async def test_malformed_authorization_headers_are_401(api: Api) -> None:
    for value in ("", "Bearer", "Basic abc", "Bearer ", api.tokens["admin"]):
        resp = await api.client.get("/api/jobs", headers={"Authorization": value})
        assert_error(resp, 401, "unauthorized")
        assert resp.headers["WWW-Authenticate"] == "Bearer"
    ok = await api.client.get("/api/jobs", headers={"Authorization": f"bearer {api.tokens['read']}"})
    assert ok.status_code == 200


async def test_the_polled_get_checks_its_token_and_scope_by_hand_as_a_dependency_would(api: Api) -> None:
    job = (await api.client.post("/api/jobs", json={"type": "t", "input_data": {}})).json()
    path = f"/api/jobs/{job['id']}"
    for value in ("", "Bearer", "Basic abc", "Bearer ", "Bearer  ", api.tokens["read"], "Bearer nope"):
        resp = await api.client.get(path, headers={"Authorization": value})
        assert_error(resp, 401, "unauthorized")
        assert resp.headers["WWW-Authenticate"] == "Bearer"
    err = assert_error(await api.client.get(path, headers=api.auth("submit")), 403, "forbidden")
    assert err["message"] == "the token 'submit' lacks the 'read' scope"
    for value in (f"bearer {api.tokens['read']}", f"BEARER   {api.tokens['read']}  "):
        ok = await api.client.get(path, headers={"Authorization": value})
        assert ok.status_code == 200 and ok.json()["id"] == job["id"]
    assert_error(await api.client.get(path, headers=api.auth("bob")), 404, "not_found")  # another user's job
    # The 401 comes before the query is read, as it did when the token was a dependency.
    assert_error(await api.client.get(f"{path}?wait=99", headers={"Authorization": ""}), 401, "unauthorized")


BAD_BODIES: list[tuple[bytes, str | None]] = [
    (b"", None), (b"", "application/json"), (b'{"type": "t", "input_data": {}}', None),
    (b'{"type": "t", "input_data": {}}', "text/plain"), (b'{"type": ', "application/json"),
    (b"\xff\xfe{", "application/json"), (b"[1, 2]", "application/json"), (b"null", "application/json"),
    (b"{}", "application/json"), (b'{"type": 5, "input_data": []}', "application/json"),
    (b'{"type": "t", "input_data": {}, "bogus": 1}', "application/vnd.api+json"),
    (b'{"type": "t", "input_data": {}, "priority": 1.5}', "application/json; charset=utf-8"),
    (b'{"type": "t", "input_data": {}, "scheduled_at": "2030-01-01T00:00:00"}', "application/json"),
    (b'{"type": "t", "input_data": {}, "dependent_on_jobs": [1]}', "application/json"),
]


async def test_the_hand_read_job_body_fails_as_a_declared_one_does(api: Api) -> None:
    """POST /api/jobs reads its body by hand: every refusal is the one FastAPI gives for the
    same body declared as a parameter, on an app with the same error handlers."""
    reference = FastAPI()
    errors.install(reference)

    @reference.post("/api/jobs")
    async def declared(body: JobIn) -> dict[str, bool]:
        return {"valid": True}

    transport = httpx.ASGITransport(app=reference, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://ref") as ref:
        for content, content_type in BAD_BODIES:
            headers = {"Content-Type": content_type} if content_type else {}
            ours = await api.client.post("/api/jobs", content=content, headers=headers)
            theirs = await ref.post("/api/jobs", content=content, headers=headers)
            assert ours.status_code == theirs.status_code and ours.status_code in (400, 422), (content, ours.text)
            assert ours.json() == theirs.json(), content
        assert await api.service.pool.fetchval("SELECT count(*) FROM jobs") == 0
        # The OpenAPI document declares the body as FastAPI does for a declared one.
        mine, declared_doc = (await api.client.get("/openapi.json")).json(), (await ref.get("/openapi.json")).json()
    post = "/api/jobs", "post"
    assert mine["paths"][post[0]][post[1]]["requestBody"] == declared_doc["paths"][post[0]][post[1]]["requestBody"]
    assert mine["components"]["schemas"]["JobIn"] == declared_doc["components"]["schemas"]["JobIn"]
    # A valid body still needs a token with the submit scope, checked before its fields are.
    no_token = await api.client.post("/api/jobs", content=b"{}", headers={"Content-Type": "application/json",
                                                                             "Authorization": ""})
    assert_error(no_token, 401, "unauthorized")
