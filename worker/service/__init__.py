"""Layer 5, the typed service: `JobService` (what the console and the HTTP API read and do) and
`JobClient` (what a backend does). The front doors above it act through these and write no SQL
of their own.

    from jobdesk.service import JobService
"""

from jobdesk.service.client import JobClient
from jobdesk.service.jobs import JobService
from jobdesk.service.read_models import (
    Attempt,
    BulkCount,
    BulkResult,
    Enqueued,
    JobDetail,
    PipelineSteps,
    Submitted,
    WorkersView,
)
from jobdesk.service.schema import ensure_schema, migrate_database, prepare_schema

__all__ = ["Attempt", "BulkCount", "BulkResult", "Enqueued", "JobClient", "JobDetail", "JobService",
           "PipelineSteps", "Submitted", "WorkersView", "ensure_schema", "migrate_database", "prepare_schema"]
