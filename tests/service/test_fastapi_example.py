"""The FastAPI example of the documentation (docs/fastapi.md), run as it is written there:
a JobClient opened in the lifespan, a handler that enqueues, and one that waits for the result."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from types import ModuleType

import httpx
import pytest

from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from tests.helpers import ROOT, RunningWorker

EXAMPLE = ROOT / "docs" / "examples" / "fastapi_app.py"
PAGE = ROOT / "docs" / "fastapi.md"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fastapi_app"] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


example = load_example()


class BuildReport(BaseProcessor):
    """The processor the page shows, with a way to fail and to take too long."""

    output_model = example.Report

    async def process(self, job: Job) -> ProcessorResult:
        month = job.input_data["month"]
        if month == "never":
            raise RuntimeError("no data for that month")
        return ProcessorResult(result_data={"month": month, "total": 42})


@pytest.fixture
async def http(dsn: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.delenv("DATABASE_LISTEN_URL", raising=False)
    app = example.app
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            yield client


def test_the_page_shows_the_example_as_it_is() -> None:
    assert f"```python\n{EXAMPLE.read_text()}```" in PAGE.read_text()


async def test_a_handler_enqueues_and_another_reads_the_job(http: httpx.AsyncClient, dsn: str) -> None:
    answer = await http.post("/reports", json={"month": "2026-03"})
    assert answer.status_code == 202
    job_id = answer.json()["job_id"]
    queued = await http.get(f"/reports/{job_id}")
    assert queued.status_code == 200 and queued.json()["status"] == "queued"
    worker = RunningWorker(dsn, {"report.build": BuildReport()})
    try:
        record = await example.app.state.jobs.wait(job_id, timeout=30)
    finally:
        await worker.stop()
    assert record.status == "completed"
    done = (await http.get(f"/reports/{job_id}")).json()
    assert done == {"status": "completed", "result": {"month": "2026-03", "total": 42}, "error": None}
    assert (await http.get("/reports/nope")).status_code == 404


async def test_a_handler_waits_for_the_typed_result(http: httpx.AsyncClient, dsn: str) -> None:
    worker = RunningWorker(dsn, {"report.build": BuildReport()}, JOB_RETRY_INTERVALS=[])
    try:
        answer = await http.post("/reports/now", json={"month": "2026-04"})
        assert answer.status_code == 200 and answer.json() == {"month": "2026-04", "total": 42}
        failed = await http.post("/reports/now", json={"month": "never"})
        assert failed.status_code == 502
        assert failed.json()["detail"] == "the report failed: RuntimeError: no data for that month"
    finally:
        await worker.stop()


async def test_a_wait_that_times_out_answers_504(http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = example.app.state.jobs
    run = jobs.run

    async def run_briefly(*args: object, **kwargs: object) -> object:
        return await run(*args, **{**kwargs, "timeout": 0.3})

    monkeypatch.setattr(jobs, "run", run_briefly)  # no worker: the job stays queued
    answer = await http.post("/reports/now", json={"month": "2026-05"})
    assert answer.status_code == 504
    assert answer.json()["detail"].endswith("did not finish within 0.3 s: it is queued")
