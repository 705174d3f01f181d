"""Progress in GET /api/jobs/{id} and its SSE stream, and GET /api/jobs/{id}/logs as JSON and
as Server-Sent Events, with a worker running the jobs in the test's loop; directly and through
PgBouncer in transaction mode."""

from __future__ import annotations

import asyncio
import json

import httpx

from jobdesk.api import create_app
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from tests.api.conftest import Api
from tests.helpers import RunningWorker, wait_for
from tests.pgbouncer import PgBouncer
from tests.report_processors import Holds, Steps


async def test_progress_in_the_job_and_its_event_stream(api: Api, dsn: str) -> None:
    holds = Holds()
    job = (await api.client.post("/api/jobs", json={"type": "hold", "input_data": {}})).json()
    assert job.get("progress") is None
    events: list[dict[str, object]] = []

    async def follow() -> None:
        async with api.client.stream("GET", f"/api/jobs/{job['id']}/events") as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))

    stream = asyncio.create_task(follow())
    worker = RunningWorker(dsn, {"hold": holds})
    try:
        async def reported() -> dict[str, object] | None:
            answer = (await api.client.get(f"/api/jobs/{job['id']}")).json()
            return answer["progress"] if answer["status"] == "in_progress" else None

        progress = await wait_for(reported, what="the progress to show in GET /api/jobs/{id}")
        assert progress["fraction"] == 0.4 and progress["message"] == "rendered 40 of 100 frames"
        assert isinstance(progress["at"], str) and progress["at"].endswith("+00:00")
        holds.release.set()
        await asyncio.wait_for(stream, 20)
    finally:
        holds.release.set()
        await worker.stop()
    # (httpx's ASGI transport hands the stream over once it ends: its events are read then.)
    running = [e["progress"] for e in events if e["status"] == "in_progress"]
    assert events[0]["progress"] is None and running[-1]["fraction"] == 0.4
    assert events[-1]["status"] == "completed"
    assert events[-1]["progress"]["fraction"] == 0.4  # kept after the end
    answer = (await api.client.get(f"/api/jobs/{job['id']}")).json()
    assert list(answer)[-2:] == ["progress", "waiting_reason"]


async def test_logs_as_json_and_followed_as_events(api: Api, dsn: str) -> None:
    job = (await api.client.post("/api/jobs", json={"type": "steps", "input_data": {"steps": 6, "every": 0.25}})).json()
    worker = RunningWorker(dsn, {"steps": Steps()})
    lines: list[dict[str, object]] = []
    ended = False
    try:
        async with api.client.stream("GET", f"/api/jobs/{job['id']}/logs?follow=true") as resp:
            assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
            event = None
            async for line in resp.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "log":
                    lines.append(json.loads(line[6:]))
                elif line.startswith("data: ") and event == "end":
                    ended = True
    finally:
        await worker.stop()
    assert ended
    assert [ln["message"] for ln in lines] == [f"step {i} of 6" for i in range(1, 7)]
    assert {(ln["attempt"], ln["logger"], ln["level"]) for ln in lines} == {(1, "report.steps", "INFO")}
    answer = (await api.client.get(f"/api/jobs/{job['id']}/logs")).json()
    assert answer["job_id"] == job["id"] and answer["lines"] == lines
    resumed = (await api.client.get(f"/api/jobs/{job['id']}/logs?follow=true",
                                    headers={"Last-Event-ID": "1.4"})).text
    assert '"message": "step 4 of 6"' not in resumed and '"message": "step 5 of 6"' in resumed
    assert set(answer["lines"][0]) == {"attempt", "seq", "at", "level", "logger", "message", "trace_id", "span_id"}


async def test_logs_of_a_job_that_is_not_there_or_not_yours(api: Api) -> None:
    missing = await api.client.get("/api/jobs/nope/logs")
    assert missing.status_code == 404 and "nope" in json.dumps(missing.json())
    missing = await api.client.get("/api/jobs/nope/logs?follow=true")
    assert missing.status_code == 404
    bad = await api.client.get("/api/jobs/nope/logs?follow=maybe")
    assert bad.status_code == 422
    job = (await api.client.post("/api/jobs", json={"type": "x", "input_data": {}, "user_id": 2})).json()
    assert (await api.client.get(f"/api/jobs/{job['id']}/logs", headers=api.auth("bob"))).status_code == 404
    mine = await api.client.get(f"/api/jobs/{job['id']}/logs", headers=api.auth("alice"))
    assert mine.status_code == 200 and mine.json()["lines"] == []


async def test_progress_and_logs_through_pgbouncer(dsn: str, pgbouncer: PgBouncer) -> None:
    """Without LISTEN the API's event stream reads a running job's progress every second, and the
    logs follow polls: both work through PgBouncer in transaction mode."""
    pooled = pgbouncer.url(dsn)
    service = await JobService.connect(pooled, settings=load_settings(DATABASE_URL=pooled), pool_size=4)
    app = create_app(service, pooled, settings=service.settings)
    holds = Holds()
    try:
        async with app.router.lifespan_context(app):
            assert not app.state.ctx.hub.listening
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
                client.headers["Authorization"] = f"Bearer {await service.create_token('admin')}"
                job = (await client.post("/api/jobs", json={"type": "hold", "input_data": {}})).json()
                events: list[dict[str, object]] = []

                async def follow() -> None:
                    async with client.stream("GET", f"/api/jobs/{job['id']}/events") as resp:
                        async for line in resp.aiter_lines():
                            if line.startswith("data: "):
                                events.append(json.loads(line[6:]))

                stream = asyncio.create_task(follow())
                worker = RunningWorker(pooled, {"hold": holds})
                try:
                    async def running() -> bool:
                        answer = (await client.get(f"/api/jobs/{job['id']}")).json()
                        return answer["status"] == "in_progress" and answer["progress"] is not None

                    await wait_for(running, what="the progress through the pooler")
                    await asyncio.sleep(1.5)  # the stream's own read of the progress
                    holds.release.set()
                    await asyncio.wait_for(stream, 30)
                    logs = (await client.get(f"/api/jobs/{job['id']}/logs?follow=true")).text
                finally:
                    holds.release.set()
                    await worker.stop()
    finally:
        await service.close()
    assert any(e["status"] == "in_progress" and e["progress"] for e in events)
    assert events[-1]["status"] == "completed"
    assert "event: log" in logs and '"message": "rendering"' in logs and logs.rstrip().endswith("data: {}")
