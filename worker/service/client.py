"""The Python API for backends: enqueue jobs and pipelines, read them, act on them.

    async with await JobClient.connect() as jobs:          # DATABASE_URL, or the embedded default
        job_id = await jobs.enqueue("echo", {"hello": "world"})
        pipeline_id = await jobs.create_pipeline([...JobCreate...])
        record = await jobs.get_job(job_id)

`JobClient` is the service every front door uses (`worker.service.JobService`), under the name
backends know it by.
"""

from __future__ import annotations

from worker.service.jobs import JobService, ensure_schema

JobClient = JobService

__all__ = ["JobClient", "ensure_schema"]
