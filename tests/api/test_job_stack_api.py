"""GET /api/jobs/{id}/stack with a worker running the job in the test's loop: the running job's
stack, the one kept after it ended, the read scope, and the errors."""

from __future__ import annotations

import asyncpg

from jobdesk.store import fleet
from tests.api.conftest import Api
from tests.helpers import RunningWorker, wait_for
from tests.stack_processors import AsyncHold


async def test_the_stack_of_a_running_job_then_the_one_kept(api: Api, conn: asyncpg.Connection, dsn: str) -> None:
    holds = AsyncHold()
    job = (await api.client.post("/api/jobs", json={"type": "hold", "input_data": {}})).json()
    worker = RunningWorker(dsn, {"hold": holds})
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs WHERE id = $1", job["id"]),
                       what="the job to run")
        resp = await api.client.get(f"/api/jobs/{job['id']}/stack", headers=api.auth("read"))
        holds.release.set()
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job["id"]),
                       what="the job to complete")
    finally:
        holds.release.set()
        await worker.stop()
    assert resp.status_code == 200, resp.text
    live = resp.json()
    assert list(live) == ["job_id", "attempt", "worker_id", "taken_at", "running", "status", "frames"]
    assert live["running"] is True and live["status"] == "in_progress" and live["attempt"] == 1
    assert live["worker_id"] == worker.worker.worker_id
    assert [f["function"] for f in live["frames"]][:2] == ["process", "hold_async"]
    assert live["frames"][1]["source"] == "await self.release.wait()  # the async job waits here"
    kept = (await api.client.get(f"/api/jobs/{job['id']}/stack")).json()
    assert kept == {**live, "running": False, "status": "completed"}


async def test_errors(api: Api, conn: asyncpg.Connection) -> None:
    job = (await api.client.post("/api/jobs", json={"type": "nobody.runs.this", "input_data": {}})).json()
    resp = await api.client.get(f"/api/jobs/{job['id']}/stack")
    assert resp.status_code == 409
    assert resp.json() == {"error": {"code": "not_running", "message": f"job {job['id']} is not running (queued)"}}
    resp = await api.client.get("/api/jobs/no-such-job/stack")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"
    resp = await api.client.get(f"/api/jobs/{job['id']}/stack", headers=api.auth("bob"))  # another user's job
    assert resp.status_code == 404
    resp = await api.client.get(f"/api/jobs/{job['id']}/stack", headers={"Authorization": "Bearer nope"})
    assert resp.status_code == 401

    await fleet.register(conn, "quiet-7", "quiet", 7, 1, ["nobody.runs.this"], "0")
    await conn.execute("UPDATE jobs SET status = 'in_progress', worker_id = 'quiet-7', attempts = 1 WHERE id = $1",
                       job["id"])
    resp = await api.client.get(f"/api/jobs/{job['id']}/stack")
    assert resp.status_code == 504
    assert resp.json()["error"] == {"code": "worker_not_answering", "message":
                                    f"worker quiet-7 did not answer within 5 s with the stack of job {job['id']}"}
    assert await conn.fetchval("SELECT count(*) FROM job_stack_requests") == 0
