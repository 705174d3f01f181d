"""Durable processors through the HTTP API (the ASGI app, a real worker): a job's stored steps in
GET /api/jobs/{id}, the waiting reason of a job waiting for an event with a timeout, retry that
keeps the steps and ?fresh=true that forgets them, and bad events answered 422 naming the problem."""

from __future__ import annotations

import re

import asyncpg

from tests.api.conftest import Api
from tests.durable_processors import PROCESSOR_MAP
from tests.helpers import RunningWorker, wait_for

PROCESSORS = {name: cls() for name, cls in PROCESSOR_MAP.items()}
CLOCK = r"\d\d:\d\d:\d\d UTC"


async def status_is(conn: asyncpg.Connection, job_id: str, status: str) -> bool:
    return bool(await conn.fetchval("SELECT status = $2 FROM jobs WHERE id = $1", job_id, status))


async def calls_of(conn: asyncpg.Connection, job_id: str) -> dict[str, int]:
    rows = await conn.fetch("SELECT step, count(*) AS n FROM step_calls WHERE job_id = $1 GROUP BY step", job_id)
    return {r["step"]: r["n"] for r in rows}


async def test_steps_reason_and_retry_through_the_api(api: Api, conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("CREATE TABLE step_calls (job_id text, step text, at timestamptz DEFAULT clock_timestamp())")
    made = await api.client.post("/api/jobs", json={"type": "durable.three_steps", "input_data": {"dsn": dsn}})
    waiter = await api.client.post("/api/jobs", json={"type": "durable.wait",
                                                      "input_data": {"key": "upload-done:42", "timeout": 3600}})
    assert made.status_code == 201 and waiter.status_code == 201, (made.text, waiter.text)
    job_id, wait_id = made.json()["id"], waiter.json()["id"]
    worker = RunningWorker(dsn, PROCESSORS)
    try:
        await wait_for(lambda: status_is(conn, job_id, "completed"), what="the job")
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM job_waits WHERE job_id = $1", wait_id),
                       what="the wait")

        got = (await api.client.get(f"/api/jobs/{job_id}")).json()
        steps = got["steps"]
        assert [s["name"] for s in steps] == ["one", "two", "three"]
        assert [s["result"] for s in steps] == [1, {"two": 2}, [1, {"two": 2}, 3]]
        for step in steps:
            assert step["attempt"] == 1 and step["duration_s"] >= 0
            assert step["started_at"].endswith("+00:00") and step["finished_at"] >= step["started_at"]
        assert got["waiting_reason"] is None

        waiting = (await api.client.get(f"/api/jobs/{wait_id}")).json()
        assert waiting["status"] == "queued"
        assert re.fullmatch(rf"waiting for event upload-done:42 \(timeout {CLOCK}\)", waiting["waiting_reason"]), \
            waiting["waiting_reason"]
        assert [s["name"] for s in waiting["steps"]] == ["@event 1"]
        assert waiting["steps"][0]["result"]["key"] == "upload-done:42"

        # Retry keeps the stored steps: only the code outside them runs again.
        await conn.execute("UPDATE jobs SET status = 'failed', error_message = 'x' WHERE id = $1", job_id)
        answer = await api.client.post(f"/api/jobs/{job_id}/retry")
        assert answer.status_code == 200, answer.text
        await wait_for(lambda: status_is(conn, job_id, "completed"), what="the retried job")
        assert await calls_of(conn, job_id) == {"one": 1, "two": 1, "three": 2}

        # ?fresh=true forgets them: every step runs again.
        await conn.execute("UPDATE jobs SET status = 'failed', error_message = 'x' WHERE id = $1", job_id)
        answer = await api.client.post(f"/api/jobs/{job_id}/retry?fresh=true")
        assert answer.status_code == 200, answer.text
        await wait_for(lambda: status_is(conn, job_id, "completed"), what="the job retried from scratch")
        assert await calls_of(conn, job_id) == {"one": 2, "two": 2, "three": 3}
        assert {s["attempt"] for s in (await api.client.get(f"/api/jobs/{job_id}")).json()["steps"]} == {3}
    finally:
        await worker.stop()


async def test_bad_events_are_422_naming_the_problem(api: Api) -> None:
    cases = [('{"key": "k", "payload": "a\\u0000b"}', "NUL character"),
             ('{"key": "a\\u0000b"}', "NUL character"),
             ('{"key": "k", "payload": "\\ud800"}', "unpaired surrogate"),
             ('{"key": "%s"}' % ("x" * 256), "at most 255"),
             ('{"key": "   "}', "non-empty key"),
             ('{"payload": 1}', "body.key")]
    for body, words in cases:
        answer = await api.client.post("/api/events", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 422, (body, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "invalid" and words in error["message"], (body, error)
        assert "database" not in error["message"], "refused before it reaches PostgreSQL"
    assert await api.service.pool.fetchval("SELECT count(*) FROM job_events") == 0
