"""/api/types: the list (read scope), pause and resume (operate; 403 for a user's token) seen by two real workers, the
limits set at run time (PUT, null clears), the audit rows, the waiting reason of a paused type's
job, and 422s for bad input with nothing written."""

from __future__ import annotations

import asyncio

from jobdesk.processors.builtin import EchoProcessor
from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_error
from tests.helpers import RunningWorker, wait_for


async def test_pause_list_and_resume_over_the_api(api: Api) -> None:
    job_id = (await api.client.post("/api/jobs", json={"type": "mail.send", "input_data": {}})).json()["id"]
    resp = await api.client.post("/api/types/mail.send/pause", json={"reason": "SMTP relay down"},
                                 headers=api.auth("operate"))
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["type"] == "mail.send" and body["paused"] is True
    assert body["paused_by"] == "operate" and body["reason"] == "SMTP relay down" and body["paused_at"]

    listed = await api.client.get("/api/types", headers=api.auth("read"))
    assert listed.status_code == 200, listed.text
    [entry] = [t for t in listed.json()["types"] if t["type"] == "mail.send"]
    assert entry["paused"] is True and entry["paused_by"] == "operate"
    assert {"limit", "limit_source", "rate", "rate_source", "user_limit", "user_limit_source", "user_rate",
            "user_rate_source"} <= set(entry)

    detail = (await api.client.get(f"/api/jobs/{job_id}")).json()
    assert detail["waiting_reason"].startswith("type paused by operate at ")
    assert detail["waiting_reason"].endswith(" UTC")

    resumed = await api.client.post("/api/types/mail.send/resume", headers=api.auth("operate"))
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    detail = (await api.client.get(f"/api/jobs/{job_id}")).json()
    assert "paused" not in (detail["waiting_reason"] or "")

    rows = await api.service.pool.fetch("SELECT action, job_type, reason, actor, source FROM audit_log "
                                        "WHERE job_type IS NOT NULL ORDER BY id")
    assert [(r["action"], r["job_type"], r["reason"], r["actor"], r["source"]) for r in rows] == [
        ("pause-type", "mail.send", "SMTP relay down", "operate", "api"),
        ("resume-type", "mail.send", None, "operate", "api")]


async def test_pause_without_a_body(api: Api) -> None:
    resp = await api.client.post("/api/types/mail.send/pause")
    assert resp.status_code == 200, resp.text
    assert resp.json()["paused"] is True and resp.json()["reason"] is None and resp.json()["paused_by"] == "admin"


async def test_a_users_token_cannot_pause_or_limit_and_read_cannot_operate(api: Api) -> None:
    for path in ("/api/types/mail.send/pause", "/api/types/mail.send/resume"):
        assert_error(await api.client.post(path, headers=api.auth("alice")), 403, "forbidden")
        assert_error(await api.client.post(path, headers=api.auth("read")), 403, "forbidden")
    assert_error(await api.client.put("/api/types/mail.send/limits", json={"limit": 1}, headers=api.auth("alice")),
                 403, "forbidden")
    assert await api.service.pool.fetchval("SELECT count(*) FROM type_controls") == 0


async def test_limits_set_at_run_time_and_cleared_with_null(api: Api) -> None:
    resp = await api.client.put("/api/types/img.resize/limits",
                                json={"limit": 2, "rate": "10/s", "user_limit": None, "user_rate": None},
                                headers=api.auth("operate"))
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["limit"], body["limit_source"]) == (2, "database (set by operate)")
    assert (body["rate"], body["rate_source"]) == ("10/s", "database (set by operate)")
    assert body["user_limit"] is None and body["user_limit_source"] is None
    pool = api.service.pool
    assert await pool.fetchval("SELECT max_running FROM type_limits WHERE type = 'img.resize'") == 2
    assert await pool.fetchval("SELECT rate_max FROM flow_limits WHERE type = 'img.resize'") == 10

    # A key left out is kept; null clears.
    resp = await api.client.put("/api/types/img.resize/limits", json={"rate": None, "user_rate": "2/m"})
    body = resp.json()
    assert body["limit"] == 2 and body["rate"] is None and body["user_rate"] == "2/m"
    assert await pool.fetchval("SELECT rate_max FROM flow_limits WHERE type = 'img.resize'") is None
    actions = [r["reason"] for r in await pool.fetch("SELECT reason FROM audit_log WHERE action = 'set-type-limits' "
                                                      "AND job_type = 'img.resize' ORDER BY id")]
    assert actions == ["limit=2, rate=10/s, user_limit=none, user_rate=none", "rate=none, user_rate=2/m"]


async def test_bad_input_is_a_422_and_changes_nothing(api: Api) -> None:
    long_name = "t" * 256
    cases = [
        ("post", f"/api/types/{long_name}/pause", None, "at most 255"),
        ("put", f"/api/types/{long_name}/limits", {"limit": 1}, "at most 255"),
        ("put", "/api/types/img.resize/limits", {"limit": -1}, "below 0"),
        ("put", "/api/types/img.resize/limits", {"user_limit": -3}, "below 0"),
        ("put", "/api/types/img.resize/limits", {"limit": 2, "rate": "ten per second"}, "not a rate"),
        ("put", "/api/types/img.resize/limits", {"user_rate": "0/s"}, "at least 1"),
        ("put", "/api/types/img.resize/limits", {"rate": "5/d"}, "not a rate"),
        ("put", "/api/types/img.resize/limits", {"limit": "many"}, "limit"),
        ("put", "/api/types/img.resize/limits", {"limit": True}, "limit"),
        ("put", "/api/types/img.resize/limits", {"user_limit": 2.5}, "user_limit"),
        ("put", "/api/types/img.resize/limits", {"speed": 3}, "speed"),
        ("put", "/api/types/img.resize/limits", {}, "no limit given"),
        ("put", "/api/types/%20/limits", {"limit": 1}, "empty"),
        ("post", "/api/types/%20/pause", None, "empty"),
        ("post", "/api/types/img.resize/pause", {"reason": "x" * 1001}, "reason"),
    ]
    for method, path, body, said in cases:
        resp = await getattr(api.client, method)(path, json=body) if body is not None else \
            await getattr(api.client, method)(path)
        error = assert_error(resp, 422, "invalid")
        assert said in error["message"], (path, body, error)
    pool = api.service.pool
    assert await pool.fetchval("SELECT count(*) FROM type_controls") == 0
    assert await pool.fetchval("SELECT count(*) FROM type_limits") == 0
    assert await pool.fetchval("SELECT count(*) FROM flow_limits") == 0
    assert await pool.fetchval("SELECT count(*) FROM audit_log WHERE job_type IS NOT NULL") == 0


async def test_a_pause_over_the_api_stops_two_workers_claiming_the_type(api: Api, dsn: str) -> None:
    workers = [RunningWorker(dsn, {"echo": EchoProcessor(), "other": EchoProcessor()}) for _ in range(2)]
    try:
        resp = await api.client.post("/api/types/echo/pause", json={"reason": "quota spent"})
        assert resp.status_code == 200, resp.text
        await asyncio.sleep(2.0)  # within a poll interval (0.05 s here), with a wide margin
        pool = api.service.pool
        await pool.execute("INSERT INTO jobs (type, input_data) SELECT t, '{}' FROM unnest('{echo,other}'::text[]) t, "
                           "generate_series(1, 10)")
        await wait_for(lambda: pool.fetchval("SELECT count(*) = 10 FROM jobs WHERE type = 'other' "
                                             "AND status = 'completed'"), what="the other type to go on")
        await asyncio.sleep(0.5)
        assert await pool.fetchval("SELECT count(*) FROM jobs WHERE type = 'echo' AND status = 'queued'") == 10
        resp = await api.client.post("/api/types/echo/resume")
        assert resp.status_code == 200, resp.text
        await wait_for(lambda: pool.fetchval("SELECT count(*) = 10 FROM jobs WHERE type = 'echo' "
                                             "AND status = 'completed'"), what="claims to start again")
    finally:
        for worker in workers:
            await worker.stop()
