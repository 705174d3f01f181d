"""A FastAPI application that hands work to jobdesk: run it with `uvicorn fastapi_app:app`
next to a `jobdesk worker` that has a processor for `report.build`."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel

from jobdesk import JobClient, JobNotFound, JobWaitTimeout, Status


class ReportRequest(BaseModel):
    month: str


class Report(BaseModel):
    """What `report.build` returns: its processor's `output_model`."""

    month: str
    total: int


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # One client (one connection pool) for the application's life: DATABASE_URL, or the
    # embedded database. Waits share one LISTEN connection, opened on the first.
    async with await JobClient.connect() as jobs:
        app.state.jobs = jobs
        yield


app = FastAPI(lifespan=lifespan)


def get_jobs(request: Request) -> JobClient:
    jobs: JobClient = request.app.state.jobs
    return jobs


Jobs = Annotated[JobClient, Depends(get_jobs)]


@app.post("/reports", status_code=202)
async def request_report(body: ReportRequest, jobs: Jobs) -> dict[str, str]:
    """Enqueue and answer at once; the caller asks for the job later."""
    job_id = await jobs.enqueue("report.build", body.model_dump())
    return {"job_id": job_id}


@app.get("/reports/{job_id}")
async def report_status(job_id: str, jobs: Jobs) -> dict[str, Any]:
    try:
        record = await jobs.get_job(job_id)
    except JobNotFound:
        raise HTTPException(404, f"no report job {job_id}") from None
    return {"status": record.status, "result": record.result_data, "error": record.error_message}


@app.post("/reports/now")
async def build_report_now(body: ReportRequest, jobs: Jobs) -> Report:
    """Enqueue and wait for the result, for work that takes a few seconds at most."""
    try:
        record = await jobs.run("report.build", body.model_dump(), timeout=10)
    except JobWaitTimeout as exc:
        raise HTTPException(504, str(exc)) from None
    if record.status != Status.COMPLETED:
        raise HTTPException(502, f"the report failed: {record.error_message}")
    return record.result(Report)
