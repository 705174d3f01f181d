"""The claim pumps against a real PostgreSQL: which jobs a worker claims, how many at once, and
when it claims again (no round after each completion, none missing for a released dependant)."""

from __future__ import annotations

import asyncio

import asyncpg
from pydantic import BaseModel

from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.processors.builtin import EchoProcessor
from jobdesk.processors.model_later import ModelLater
from jobdesk.store import transitions
from tests.helpers import RunningWorker, wait_for


async def done(conn: asyncpg.Connection, *ids: str, status: str = "completed") -> bool:
    n = await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = $2",
                            list(ids), status)
    return n == len(ids)


async def test_worker_claims_only_its_types(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await transitions.enqueue(conn, [JobCreate("echo", {}), JobCreate("unknown.type", {})])
    worker = RunningWorker(dsn, {"echo": EchoProcessor()})
    try:
        await wait_for(lambda: done(conn, ids[0]), what="echo job")
        await asyncio.sleep(0.3)
    finally:
        await worker.stop()
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", ids[1]) == "queued"


class Slow(BaseProcessor):
    running = 0
    peak = 0

    async def process(self, job: Job) -> ProcessorResult:
        Slow.running += 1
        Slow.peak = max(Slow.peak, Slow.running)
        try:
            await asyncio.sleep(0.1)
        finally:
            Slow.running -= 1
        return ProcessorResult({})


async def test_concurrency_limit(conn: asyncpg.Connection, dsn: str) -> None:
    Slow.running = Slow.peak = 0
    await transitions.enqueue(conn, [JobCreate("slow", {}) for _ in range(40)])
    worker = RunningWorker(dsn, {"slow": Slow()}, MAX_CONCURRENT_JOBS=4)
    try:
        await wait_for(lambda: conn.fetchval("SELECT bool_and(status = 'completed') FROM jobs"), what="all jobs")
    finally:
        await worker.stop()
    assert Slow.peak == 4


async def test_a_dependant_starts_at_once_though_nothing_announces_it(conn: asyncpg.Connection, dsn: str) -> None:
    """A worker waits for news after a round that completed jobs: the release of a dependant
    is news (a NOTIFY), so the dependant starts well within the (long) poll interval."""
    parent = JobCreate("echo", {"n": 1})
    chain = [parent, JobCreate("echo", {"n": 2}, dependent_on_jobs=[parent.id])]
    worker = RunningWorker(dsn, {"echo": EchoProcessor()}, JOB_PROCESSOR_POLL_INTERVAL=5.0)
    try:
        await asyncio.sleep(0.5)  # idle: its rounds are over, and it waits for news
        await transitions.enqueue(conn, chain)
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 2 FROM jobs WHERE status = 'completed'"),
                       timeout=2, what="the dependant, well before the 5 s poll")
    finally:
        await worker.stop()


async def test_a_trickle_of_jobs_costs_no_claim_after_each_completion(conn: asyncpg.Connection, dsn: str) -> None:
    """Each job announced alone costs two round trips: one pump claims it (every lane, as the
    other waits), then one pump completes it. Before, both pumps claimed (one found nothing)
    and a claim followed each completion: four."""
    worker = RunningWorker(dsn, {"echo": EchoProcessor()}, JOB_PROCESSOR_POLL_INTERVAL=5.0)
    try:
        await asyncio.sleep(0.5)
        before = worker.worker.stats["rounds"]
        for i in range(20):
            await transitions.enqueue(conn, [JobCreate("echo", {"n": i})])
            await wait_for(lambda n=i + 1: conn.fetchval(
                "SELECT count(*) = $1 FROM jobs WHERE status = 'completed'", n), what=f"job {i}")
        rounds = worker.worker.stats["rounds"] - before
    finally:
        await worker.stop()
    assert rounds <= 2 * 20 + 2, rounds


class LaterInput(BaseModel):
    seconds: float = 0


class NamesItsModel(BaseProcessor):
    """Names its input model to be imported at first use, as the built-in processors do."""

    input_model = ModelLater(__name__, "LaterInput")  # type: ignore[assignment]

    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({})


class NamesAMissingModel(NamesItsModel):
    input_model = ModelLater("tests.runtime.no_such_module", "Nothing")  # type: ignore[assignment]


async def test_a_worker_with_nothing_to_do_loads_its_processors_input_models(dsn: str) -> None:
    """The first jobs after a start used to wait for their processors' models (pydantic with
    them, ~25 ms of the event loop); an idle worker loads them before any job comes. One that
    cannot be loaded is left to its first job and does not stop the worker."""
    named = NamesItsModel.__dict__["input_model"]
    assert named.model is None
    worker = RunningWorker(dsn, {"later": NamesItsModel(), "missing": NamesAMissingModel()})
    async def loaded() -> bool:
        return named.model is not None

    try:
        await wait_for(loaded, timeout=5, what="the model loaded while idle")
        assert named.model is LaterInput
        assert not worker.task.done()
    finally:
        await worker.stop()
