"""Layer 5, the typed service: `JobService` (what the console and the HTTP API read and do) and
`JobClient` (what a backend does). The front doors above it act through these and write no SQL
of their own.

    from jobdesk.service import JobService
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for type checkers; at run time each name loads when first used (see `jobdesk`)
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

_EXPORTS = {
    "JobClient": "jobdesk.service.client",
    "JobService": "jobdesk.service.jobs",
    **dict.fromkeys(("Attempt", "BulkCount", "BulkResult", "Enqueued", "JobDetail", "PipelineSteps", "Submitted",
                     "WorkersView"), "jobdesk.service.read_models"),
    **dict.fromkeys(("ensure_schema", "migrate_database", "prepare_schema"), "jobdesk.service.schema"),
}

__all__ = ["Attempt", "BulkCount", "BulkResult", "Enqueued", "JobClient", "JobDetail", "JobService",
           "PipelineSteps", "Submitted", "WorkersView", "ensure_schema", "migrate_database", "prepare_schema"]


def __getattr__(name: str) -> object:
    from jobdesk.core.lazy import load_export

    return load_export(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
