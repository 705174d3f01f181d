"""Debounce: enqueues with a unique_key and a debounce gather into one queued job, which takes the
last input and starts once the enqueues pause (or at debounce_max from the first), through the
store, the client, `jobdesk submit --debounce` and POST /api/jobs."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import asyncpg
import pytest

from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.service.jobs import JobService
from jobdesk.store import transitions
from tests.api.conftest import Api, api  # noqa: F401  (the API fixture)
from tests.helpers import RunningWorker, run_cli, wait_for


class Remembers(BaseProcessor):
    def __init__(self) -> None:
        self.inputs: list[dict[str, object]] = []

    async def process(self, job: Job) -> ProcessorResult:
        self.inputs.append(job.input_data)
        return ProcessorResult({})


async def test_fifty_enqueues_within_a_second_give_one_job_with_the_last_input(conn: asyncpg.Connection,
                                                                               dsn: str) -> None:
    seen = Remembers()
    worker = RunningWorker(dsn, {"digest": seen})
    service = await JobService.connect(dsn, pool_size=2)
    try:
        began = time.monotonic()
        ids = [await service.enqueue("digest", {"n": i}, unique_key="inbox-7", debounce=1.5) for i in range(50)]
        assert time.monotonic() - began < 1.5, "the enqueues took too long for this check"
        assert len(set(ids)) == 1
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", ids[0]),
                       timeout=30, what="the debounced job")
    finally:
        await service.close()
        await worker.stop()
    assert seen.inputs == [{"n": 49}]
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 1


async def test_the_start_moves_with_each_enqueue_up_to_debounce_max(conn: asyncpg.Connection) -> None:
    first = JobCreate("digest", {"n": 0}, unique_key="k", debounce=60, debounce_max=90)
    [(job_id, dup)] = await transitions.enqueue_detailed(conn, [first])
    assert not dup
    row = await conn.fetchrow("SELECT created_at, scheduled_at, run_at FROM jobs WHERE id = $1", job_id)
    assert row["scheduled_at"] - row["created_at"] == pytest.approx(timedelta(seconds=60), abs=timedelta(seconds=1))
    assert row["run_at"] == row["scheduled_at"]  # it waits in jobs_waiting_idx
    await conn.execute("UPDATE jobs SET created_at = created_at - interval '40 seconds' WHERE id = $1", job_id)
    debounced: set[str] = set()
    again = JobCreate("digest", {"n": 1}, unique_key="k", debounce=60, debounce_max=90)
    [(same, dup)] = await transitions.enqueue_detailed(conn, [again], debounced)
    assert same == job_id and dup and debounced == {again.id}
    row = await conn.fetchrow("SELECT created_at, scheduled_at, input_data FROM jobs WHERE id = $1", job_id)
    # now + 60 s would be 100 s after the first enqueue: debounce_max keeps it at 90.
    assert row["scheduled_at"] - row["created_at"] == timedelta(seconds=90)
    assert row["input_data"] == {"n": 1}


async def test_a_job_that_started_is_not_debounced(conn: asyncpg.Connection) -> None:
    [job_id] = await transitions.enqueue(conn, [JobCreate("digest", {"n": 0}, unique_key="k", debounce=0.01)])
    await asyncio.sleep(0.05)
    await transitions.complete_and_claim(conn, "w", ["digest"], 1)
    debounced: set[str] = set()
    [(same, dup)] = await transitions.enqueue_detailed(
        conn, [JobCreate("digest", {"n": 1}, unique_key="k", debounce=5)], debounced)
    assert (same, dup, debounced) == (job_id, True, set())
    assert await conn.fetchval("SELECT input_data FROM jobs WHERE id = $1", job_id) == {"n": 0}


async def test_a_job_waiting_for_its_retry_is_not_debounced(conn: asyncpg.Connection) -> None:
    # It is queued again, but it has started: its input is the one its first attempt ran with.
    [job_id] = await transitions.enqueue(conn, [JobCreate("digest", {"n": 0}, unique_key="k", debounce=0.01)])
    await asyncio.sleep(0.05)
    _, [job] = await transitions.complete_and_claim(conn, "w", ["digest"], 1)
    failed = await transitions.fail_attempt(conn, "w", job, "ValueError: no", None, intervals=[3600])
    assert failed.status == "queued"
    retry_at = await conn.fetchval("SELECT run_at FROM jobs WHERE id = $1", job_id)
    debounced: set[str] = set()
    [(same, dup)] = await transitions.enqueue_detailed(
        conn, [JobCreate("digest", {"n": 1}, unique_key="k", debounce=5)], debounced)
    assert (same, dup, debounced) == (job_id, True, set())
    row = await conn.fetchrow("SELECT input_data, run_at FROM jobs WHERE id = $1", job_id)
    assert row["input_data"] == {"n": 0} and row["run_at"] == retry_at


@pytest.mark.parametrize("job, field", [
    (JobCreate("digest", {}, debounce=5), "debounce"),  # no unique_key
    (JobCreate("digest", {}, unique_key="k", debounce=0), "debounce"),
    (JobCreate("digest", {}, unique_key="k", debounce_max=5), "debounce_max"),
    (JobCreate("digest", {}, unique_key="k", debounce=10, debounce_max=5), "debounce_max"),
])
async def test_a_bad_debounce_is_refused(conn: asyncpg.Connection, job: JobCreate, field: str) -> None:
    with pytest.raises(InvalidJob) as err:
        await transitions.enqueue(conn, [job])
    assert err.value.field == field


async def test_the_api_says_debounced(api: Api) -> None:  # noqa: F811
    body = {"type": "digest", "input_data": {"n": 0}, "unique_key": "k", "debounce": 5}
    first = await api.client.post("/api/jobs", json=body)
    assert first.status_code == 201 and first.json()["debounced"] is False
    again = await api.client.post("/api/jobs", json={**body, "input_data": {"n": 1}, "debounce_max": 30})
    assert again.status_code == 200, again.text
    assert again.json()["debounced"] is True and again.json()["id"] == first.json()["id"]
    assert again.json()["input_data"] == {"n": 1}
    plain = await api.client.post("/api/jobs", json={"type": "digest", "input_data": {}})
    assert "debounced" not in plain.json()  # the answer of a job without debounce is as before
    bad = await api.client.post("/api/jobs", json={"type": "digest", "input_data": {}, "debounce": 5})
    assert bad.status_code == 422 and "unique_key" in bad.text


async def test_the_api_does_not_say_debounced_of_a_job_waiting_for_its_retry(api: Api,  # noqa: F811
                                                                             conn: asyncpg.Connection) -> None:
    body = {"type": "digest", "input_data": {"n": 0}, "unique_key": "k", "debounce": 0.01}
    first = (await api.client.post("/api/jobs", json=body)).json()
    await asyncio.sleep(0.05)
    _, [job] = await transitions.complete_and_claim(conn, "w", ["digest"], 1)
    await transitions.fail_attempt(conn, "w", job, "ValueError: no", None, intervals=[3600])
    # With an Idempotency-Key the answer is rendered from the job read back after the enqueue.
    again = await api.client.post("/api/jobs", json={**body, "input_data": {"n": 1}},
                                  headers={"Idempotency-Key": "retry-1"})
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first["id"] and again.json()["debounced"] is False
    assert again.json()["input_data"] == {"n": 0}


def test_cli_submit_debounce(dsn: str) -> None:
    first = json.loads(run_cli("submit", "digest", "--unique-key", "k", "--debounce", "5s", "--json", dsn=dsn).stdout)
    again = run_cli("submit", "digest", "--input", '{"n": 2}', "--unique-key", "k", "--debounce", "5s", dsn=dsn)
    assert again.returncode == 0 and first["id"] in again.stdout and "debounced" in again.stdout
    bad = run_cli("submit", "digest", "--unique-key", "k", "--debounce", "soon", dsn=dsn)
    assert bad.returncode != 0 and "--debounce" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
