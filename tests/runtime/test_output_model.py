"""A processor's `output_model`: the worker checks `result_data` against it after `process`
(a mismatch fails the job at once, as a result that is not a ProcessorResult does), and a backend
reads the result back typed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from pydantic import BaseModel, ValidationError

from jobdesk import JobClient, NoJobResult, Status
from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.settings import load_settings
from jobdesk.runtime.results import InvalidResult, check_output
from tests.helpers import RunningWorker


class SumIn(BaseModel):
    numbers: list[int]


class SumOut(BaseModel):
    total: int
    count: int = 0


class Summer(BaseProcessor):
    input_model = SumIn
    output_model = SumOut

    async def process(self, job: Job) -> ProcessorResult:
        numbers = SumIn.model_validate(job.input_data).numbers
        if job.input_data.get("buggy"):
            return ProcessorResult({"sum": sum(numbers)})  # not what SumOut says
        return ProcessorResult({"total": sum(numbers), "count": len(numbers)})


class ReturnsADict(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return {"total": 1}  # type: ignore[return-value]  # the mistake under test


class Untyped(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({"anything": [1, "two"]})


@pytest.fixture
async def client(dsn: str) -> AsyncIterator[JobClient]:
    jobs = await JobClient.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2)
    running = RunningWorker(dsn, {"sum": Summer(), "untyped": Untyped(), "dict": ReturnsADict()})
    yield jobs
    await running.stop()
    await jobs.close()


async def test_a_result_that_fits_completes_and_reads_back_typed(client: JobClient) -> None:
    record = await client.run("sum", {"numbers": [1, 2, 3]}, timeout=30)
    assert record.status == Status.COMPLETED
    out = record.result(SumOut)
    assert isinstance(out, SumOut) and out.total == 6 and out.count == 3
    with pytest.raises(ValidationError):
        record.result(SumIn)


async def test_a_result_that_does_not_fit_fails_the_job_at_once(client: JobClient, conn: asyncpg.Connection) -> None:
    record = await client.run("sum", {"numbers": [1], "buggy": True}, timeout=30)
    assert record.status == Status.FAILED and record.retry_count == 0
    assert "result_data does not match SumOut: total: Field required" in (record.error_message or "")
    attempts = await conn.fetch("SELECT outcome, error_message FROM job_attempts WHERE job_id = $1 ORDER BY attempt",
                                record.id)
    assert len(attempts) == 1, "a retry would return the same result: none is spent"
    assert "total: Field required" in attempts[0]["error_message"]
    assert record.result_data is None
    with pytest.raises(NoJobResult, match=f"job {record.id} is failed .*: it has no result"):
        record.result(SumOut)


async def test_a_result_that_is_not_a_processor_result_fails_the_job_at_once(client: JobClient) -> None:
    record = await client.run("dict", {}, timeout=30)
    assert record.status == Status.FAILED and record.retry_count == 0 and record.attempts == 1
    assert "returned dict, not ProcessorResult" in (record.error_message or "")


async def test_a_processor_without_an_output_model_returns_what_it_likes(client: JobClient) -> None:
    record = await client.run("untyped", {}, timeout=30)
    assert record.status == Status.COMPLETED and record.result_data == {"anything": [1, "two"]}


def test_the_mismatch_names_each_field_by_its_path() -> None:
    class Nested(BaseModel):
        items: list[SumOut]

    with pytest.raises(InvalidResult) as caught:
        check_output(Nested, ProcessorResult({"items": [{"total": 1}, {"total": "x"}]}))
    assert str(caught.value) == ("result_data does not match Nested: items.1.total: "
                                 "Input should be a valid integer, unable to parse string as an integer")
    check_output(SumOut, ProcessorResult({"total": 1}))  # fits: nothing raised
