"""The service's public names: one class to its users, importable from where they always were."""

from __future__ import annotations

import worker.service
import worker.service.jobs
from worker.service import JobClient, JobService


def test_service_package_exports_the_service_and_its_read_models() -> None:
    assert JobClient is JobService
    for name in ("Attempt", "BulkCount", "BulkResult", "Enqueued", "JobDetail", "PipelineSteps", "Submitted",
                 "WorkersView"):
        assert getattr(worker.service, name) is getattr(worker.service.jobs, name)


def test_names_imported_from_service_jobs_are_still_there() -> None:
    for name in ("JobService", "Attempt", "BulkCount", "Enqueued", "JobDetail", "PipelineSteps", "BULK_COUNT_CAP",
                 "ensure_schema", "prepare_schema", "migrate_database"):
        assert hasattr(worker.service.jobs, name), name
