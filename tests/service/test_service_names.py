"""The service's public names: the client a backend uses, the service every front door uses,
importable from where they always were."""

from __future__ import annotations

import jobdesk
import jobdesk.service
import jobdesk.service.jobs
from jobdesk.core.version import __version__
from jobdesk.service import JobClient, JobService

# What a backend does with a client: enqueue, read, wait, act.
CLIENT_METHODS = ("connect", "close", "enqueue", "enqueue_many", "create_pipeline", "get_job", "job_records",
                  "list_jobs", "wait", "wait_many", "run", "cancel", "retry", "approve", "reject",
                  "retry_downstream", "cancel_pipeline", "retry_pipeline")
# What the console, the CLI and the HTTP API read besides: on the service only.
SERVICE_ONLY = ("job_detail", "job_page", "status_counts", "metrics", "workers_view", "bulk_count", "bulk_run",
                "create_token", "authenticate", "schedules", "add_schedule", "pipeline_steps", "enqueue_batch",
                "enqueue_once", "enqueue_records", "failure_groups")


def test_the_service_is_a_client_with_the_front_doors_reads_besides() -> None:
    assert issubclass(JobService, JobClient)
    for name in CLIENT_METHODS:
        assert hasattr(JobClient, name), name
    for name in SERVICE_ONLY:
        assert hasattr(JobService, name), name
        assert not hasattr(JobClient, name), name


def test_service_package_exports_the_service_and_its_read_models() -> None:
    for name in ("Attempt", "BulkCount", "BulkResult", "Enqueued", "JobDetail", "PipelineSteps", "Submitted",
                 "WorkersView"):
        assert getattr(jobdesk.service, name) is getattr(jobdesk.service.jobs, name)


def test_names_imported_from_service_jobs_are_still_there() -> None:
    for name in ("JobService", "Attempt", "BulkCount", "Enqueued", "JobDetail", "PipelineSteps", "BULK_COUNT_CAP",
                 "ensure_schema", "prepare_schema", "migrate_database"):
        assert hasattr(jobdesk.service.jobs, name), name


def test_the_package_names_its_public_surface() -> None:
    from jobdesk import BaseProcessor, Job, JobClient, JobCreate, PermanentJobError, ProcessorResult  # noqa: F401

    assert jobdesk.JobClient is JobClient
    assert jobdesk.__version__ == __version__
    for name in jobdesk.__all__:
        assert hasattr(jobdesk, name), name
    assert {"JobClient", "JobWaitTimeout", "NoJobResult", "JobRecord", "Status"} <= set(jobdesk.__all__)
