"""DATABASE_READ_URL against a real streaming standby (tests/read_replica.py): the service's and
the HTTP API's reads are served by the standby, every write by the primary; a job not on the
standby yet is found on the primary; fenced reads see the service's own writes; the lag reads
0 when the standby has caught up and more than a second while its replay is paused, and a
single write after a long idle time does not read as that long behind; `jobdesk doctor` names
the read replica."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from jobdesk.api import create_app
from jobdesk.api.server import connect_service
from jobdesk.core.errors import SettingsError
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from tests.helpers import run_cli
from tests.read_replica import pause_replay, replica_settings, resume_replay, start_pair
from tests.replication import Pair, free_port


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    replicated = start_pair()
    try:
        yield replicated
    finally:
        replicated.stop()


@pytest.fixture
async def service(pair: Pair) -> AsyncIterator[JobService]:
    """The API's service (its reads on the standby), the standby caught up and replaying."""
    jobs = await connect_service(replica_settings(pair), pool_size=4)
    try:
        assert await jobs.fence_reads(wait=10), "the standby did not catch up"
        yield jobs
    finally:
        await resume_replay(pair)
        await jobs.close()


async def test_reads_on_the_standby_and_writes_on_the_primary(pair: Pair, service: JobService) -> None:
    reads = await service._read_pool()
    assert await reads.fetchval("SELECT pg_is_in_recovery()") is True
    assert await service.pool.fetchval("SELECT pg_is_in_recovery()") is False
    seen_before = await service.enqueue("echo", {"n": 1})
    assert await service.fence_reads(wait=10)
    assert (await service.replica_lag()).seconds == 0  # type: ignore[union-attr]

    await pause_replay(pair)
    fresh = await service.enqueue("echo", {"n": 2})  # a write: the standby would refuse it
    listed = {r.id for r in await service.list_jobs()}
    assert seen_before in listed and fresh not in listed  # the list is the standby's
    assert fresh in {r.id for r in await service.on_primary().list_jobs()}
    # One job asked for by id is looked for on the primary when the standby has not got it yet.
    assert (await service.get_job(fresh)).status == "queued"
    assert (await service.job_detail(fresh)).job.id == fresh

    await service.cancel([seen_before])
    assert (await service.get_job(seen_before)).status == "queued"  # the standby's, still
    assert not await service.fence_reads(wait=0.2)  # replay is paused: the fence holds ...
    assert (await service.get_job(seen_before)).status == "cancelled"  # ... and reads are the primary's
    assert fresh in {r.id for r in await service.list_jobs()}

    await asyncio.sleep(1.5)
    await service.enqueue("echo", {"n": 3})
    lag = await service.replica_lag()
    assert lag is not None and lag.standby and lag.seconds > 1.0, lag
    assert lag.describe().startswith("replica ") and lag.describe().endswith(" s behind")

    await resume_replay(pair)
    assert await service.fence_reads(wait=10)
    assert (await service.replica_lag()).seconds == 0  # type: ignore[union-attr]
    assert (await service.get_job(seen_before)).status == "cancelled"  # now from the standby
    assert fresh in {r.id for r in await service.list_jobs()}


async def test_api_gets_on_the_standby(pair: Pair, service: JobService) -> None:
    app = create_app(service, pair.primary.dsn(), settings=service.settings, auth=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            made = await client.post("/api/jobs", json={"type": "echo", "input_data": {}})
            old = made.json()["id"]
            assert await service.fence_reads(wait=10)
            await pause_replay(pair)

            made = await client.post("/api/jobs", json={"type": "echo", "input_data": {}})
            assert made.status_code == 201, made.text
            new = made.json()["id"]
            got = await client.get(f"/api/jobs/{new}")  # not on the standby: read on the primary
            assert got.status_code == 200 and got.json()["status"] == "queued", got.text
            assert (await client.get("/api/jobs/no-such-job")).status_code == 404
            ids = [j["id"] for j in (await client.get("/api/jobs")).json()["items"]]
            assert old in ids and new not in ids  # the list is the standby's

            cancelled = await client.post(f"/api/jobs/{old}/cancel")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
            assert (await client.get(f"/api/jobs/{old}")).json()["status"] == "queued"  # the standby's

            await resume_replay(pair)
            assert await service.fence_reads(wait=10)
            assert (await client.get(f"/api/jobs/{old}")).json()["status"] == "cancelled"
            ids = [j["id"] for j in (await client.get("/api/jobs")).json()["items"]]
            assert new in ids


async def test_without_read_url_reads_stay_on_the_primary(pair: Pair) -> None:
    settings = load_settings(DATABASE_URL=pair.primary.dsn())
    async with await connect_service(settings, pool_size=2) as jobs:
        assert jobs.replica is None and await jobs.replica_lag() is None
        assert await (await jobs._read_pool()).fetchval("SELECT pg_is_in_recovery()") is False
    # A client that asks for no replica (a backend's JobClient) reads the primary too.
    async with await JobService.connect(pair.primary.dsn(), settings=replica_settings(pair), pool_size=2) as jobs:
        assert jobs.replica is None


async def test_lag_after_an_idle_primary_is_not_the_idle_time(pair: Pair, service: JobService) -> None:
    await asyncio.sleep(2.5)  # nothing written: the last transaction the standby replayed ages
    started = time.monotonic()
    assert (await service.replica_lag()).seconds == 0  # type: ignore[union-attr]
    await pause_replay(pair)
    await service.enqueue("echo", {})
    lag = await service.replica_lag()
    # The standby was caught up when the first lag was read: it is behind by no more than the time
    # since then, although the last commit it replayed is at least 2.5 s older than that.
    assert lag is not None and 0 < lag.seconds <= time.monotonic() - started, lag


def test_read_url_needs_database_url() -> None:
    with pytest.raises(SettingsError, match="^invalid setting DATABASE_READ_URL: .*needs DATABASE_URL"):
        load_settings(DATABASE_URL=None, DATABASE_READ_URL="postgresql://replica/jobdesk")
    assert load_settings(DATABASE_URL="postgresql://p/j", DATABASE_READ_URL="").DATABASE_READ_URL is None


def test_doctor_names_the_read_replica(pair: Pair) -> None:
    out = run_cli("doctor", dsn=pair.primary.dsn(), DATABASE_READ_URL=pair.standby.dsn())
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"read replica (DATABASE_READ_URL): {pair.standby.host}  standby  replay delay" in out.stdout
    found = json.loads(run_cli("doctor", "--json", dsn=pair.primary.dsn(), DATABASE_READ_URL=pair.standby.dsn()).stdout)
    assert [h["role"] for h in found["read_replica"]] == ["standby"]
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/jobdesk?sslmode=disable"
    out = run_cli("doctor", dsn=pair.primary.dsn(), DATABASE_READ_URL=nowhere)
    assert out.returncode == 1 and "problem: the read replica 127.0.0.1:" in out.stdout, out.stdout
