"""`POST /api/jobs` enqueues a job whose type no live worker serves, and says so in `warnings`."""

from __future__ import annotations

from jobdesk.store.fleet import register
from tests.api.conftest import Api


async def test_the_answer_warns_of_a_type_no_live_worker_serves(api: Api) -> None:
    async with api.service.pool.acquire() as conn:
        await register(conn, "w-1", "host", 1, 1, ["crunch"], "test")
    served = await api.client.post("/api/jobs", json={"type": "crunch", "input_data": {}})
    assert served.status_code == 201 and served.json()["warnings"] == [], served.text
    for headers in ({}, {"Idempotency-Key": "k-1"}):  # the plain path, and the one with a key
        typo = await api.client.post("/api/jobs", json={"type": "crnch", "input_data": {}}, headers=headers)
        assert typo.status_code == 201, typo.text
        assert typo.json()["status"] == "queued" and typo.json()["warnings"] == [
            "no live worker serves crnch (did you mean crunch?); its jobs wait until a worker that serves it starts"]
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs WHERE type = 'crnch'") == 2
