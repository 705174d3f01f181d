"""scheduled_at and unique_key through POST /api/jobs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from tests.api.conftest import Api


async def test_scheduled_at_is_stored_and_returned(api: Api) -> None:
    at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    r = await api.client.post("/api/jobs", json={"type": "a", "input_data": {}, "scheduled_at": at.isoformat()})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["status"] == "queued" and datetime.fromisoformat(body["scheduled_at"]) == at
    assert body["duplicate"] is False
    got = (await api.client.get(f"/api/jobs/{body['id']}")).json()
    assert datetime.fromisoformat(got["scheduled_at"]) == at


async def test_a_time_without_an_offset_is_refused(api: Api) -> None:
    r = await api.client.post("/api/jobs", json={"type": "a", "input_data": {}, "scheduled_at": "2030-01-01T02:00"})
    assert r.status_code == 422
    assert "scheduled_at" in r.text


async def test_a_duplicate_is_200_with_the_holder(api: Api) -> None:
    first = await api.client.post("/api/jobs", json={"type": "a", "input_data": {}, "unique_key": "order-7"})
    assert first.status_code == 201 and first.json()["duplicate"] is False
    again = await api.client.post("/api/jobs", json={"type": "a", "input_data": {"x": 1}, "unique_key": "order-7"})
    assert again.status_code == 200
    assert again.json()["duplicate"] is True and again.json()["id"] == first.json()["id"]
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs") == 1


async def test_concurrent_duplicates_through_the_group_commit(api: Api) -> None:
    answers = await asyncio.gather(*(api.client.post("/api/jobs", json={
        "type": "a", "input_data": {}, "unique_key": f"k{i % 3}"}) for i in range(30)))
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs") == 3
    assert sorted(r.status_code for r in answers) == [200] * 27 + [201] * 3
    by_key: dict[str, set[str]] = {}
    for r in answers:
        by_key.setdefault(r.json()["unique_key"], set()).add(r.json()["id"])
    assert all(len(ids) == 1 for ids in by_key.values())
    submitted = await api.service.pool.fetchval("SELECT sum(cardinality(job_ids)) FROM audit_log "
                                                "WHERE action = 'submit'")
    assert submitted == 3


async def test_a_duplicate_under_an_idempotency_key(api: Api) -> None:
    await api.client.post("/api/jobs", json={"type": "a", "input_data": {}, "unique_key": "u"})
    r = await api.client.post("/api/jobs", json={"type": "a", "input_data": {}, "unique_key": "u"},
                              headers={"Idempotency-Key": "req-1"})
    assert r.status_code == 200 and r.json()["duplicate"] is True


async def test_a_time_out_of_range_is_422(api: Api) -> None:
    r = await api.client.post("/api/jobs", json={"type": "a", "input_data": {},
                                                 "scheduled_at": "0001-01-01T00:00:00+14:00"})
    assert r.status_code == 422 and "scheduled_at" in r.text


async def test_waiting_reason_in_get(api: Api) -> None:
    created = (await api.client.post("/api/jobs", json={"type": "nobody.serves", "input_data": {}})).json()
    got = (await api.client.get(f"/api/jobs/{created['id']}")).json()
    assert got["waiting_reason"] == "no live worker serves nobody.serves"
    await api.client.post(f"/api/jobs/{created['id']}/cancel")
    assert (await api.client.get(f"/api/jobs/{created['id']}")).json()["waiting_reason"] is None
