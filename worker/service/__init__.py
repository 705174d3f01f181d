"""Layer 5, the typed service: `JobService` (what the console and the HTTP API read and do) and
`JobClient` (what a backend does). The front doors above it act through these and write no SQL
of their own.

    from worker.service import JobService
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.service.client import JobClient
    from worker.service.jobs import JobService
    from worker.service.read_models import (
        Attempt,
        BulkCount,
        BulkResult,
        Enqueued,
        JobDetail,
        PipelineSteps,
        Submitted,
        WorkersView,
    )
    from worker.service.schema import ensure_schema, migrate_database, prepare_schema

# Where each name is defined: loaded when first asked for, so that importing one module of the
# service (the worker's schema check, a command's read models) does not load all of them.
_HOMES = {"JobClient": "client", "JobService": "jobs", "ensure_schema": "schema", "migrate_database": "schema",
          "prepare_schema": "schema", **dict.fromkeys(("Attempt", "BulkCount", "BulkResult", "Enqueued", "JobDetail",
                                                       "PipelineSteps", "Submitted", "WorkersView"), "read_models")}

__all__ = ["Attempt", "BulkCount", "BulkResult", "Enqueued", "JobClient", "JobDetail", "JobService",
           "PipelineSteps", "Submitted", "WorkersView", "ensure_schema", "migrate_database", "prepare_schema"]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'worker.service' has no attribute {name!r}")
    return getattr(importlib.import_module(f"worker.service.{home}"), name)
