"""The one typed service every front door uses: the CLI, the console and the HTTP API read and act
through `JobService` (Python backends through its part `JobClient`), and none of them writes SQL
of its own.

    async with await JobService.connect(source="cli") as jobs:
        job_id = await jobs.enqueue("echo", {"hello": "world"})
        detail = await jobs.job_detail(job_id)

A service holds a pool and an actor (who acts, for the audit log). `as_actor` gives a view on the
same pool for another actor, optionally restricted to one user's jobs: an HTTP request made with
a user's token sees and acts on that user's jobs only, and another user's job is "not found".

`JobService` is one class put together from parts, one module each. A backend's `JobClient`
(`client`) is the first of them: `base` (the pool, the actor, the user scope), `enqueue`, the
record lookups of `job_reads`, `actions` and `waiting`. The service adds `submissions` (the HTTP
API's enqueueing), the rest of `job_reads`, `pipelines`, `bulk`, `fleet`, `schedules`, `stats`,
`tokens`, `export`, `types` (job types paused and limited across the fleet) and `access` (grants,
and the refusal of actions on a role that cannot change jobs) `job_ids` (a job named by a
part of its id) and `job_stacks` (what a running job is doing now); its read models are
in `read_models`, the schema checks in `schema`.
"""

from __future__ import annotations

from jobdesk.service.access import AccessControl
from jobdesk.service.bulk import BulkActions
from jobdesk.service.client import JobClient
from jobdesk.service.export import JobExport
from jobdesk.service.fleet import FleetControl
from jobdesk.service.job_ids import JobIds
from jobdesk.service.job_logs import JobLogReads
from jobdesk.service.job_stacks import JobStacks
from jobdesk.service.pipelines import PipelineReads
from jobdesk.service.read_models import (
    BULK_COUNT_CAP,
    Attempt,
    BulkCount,
    BulkResult,
    Enqueued,
    JobDetail,
    JobLogLine,
    JobProgress,
    PipelineSteps,
    Submitted,
    WorkersView,
)
from jobdesk.service.schedules import ScheduleControl
from jobdesk.service.schema import ensure_schema, migrate_database, prepare_schema
from jobdesk.service.stats import StatsReads
from jobdesk.service.submissions import Submissions
from jobdesk.service.tokens import TokenStore
from jobdesk.service.types import TypeControls


class JobService(JobClient, Submissions, StatsReads, PipelineReads, BulkActions, FleetControl, ScheduleControl,
                 TokenStore, JobExport, TypeControls, JobLogReads, AccessControl, JobIds,
                 JobStacks):
    """Reads and actions on jobs, pipelines and workers, over one pool: everything a `JobClient`
    does, and what the console, the CLI and the HTTP API read and do besides. A job id a person
    typed (whole, short, or a part) becomes the whole id through `resolve_job_id`."""


__all__ = ["BULK_COUNT_CAP", "Attempt", "BulkCount", "BulkResult", "Enqueued", "JobDetail", "JobLogLine", "JobProgress",
           "JobService", "PipelineSteps", "Submitted", "WorkersView", "ensure_schema", "migrate_database",
           "prepare_schema"]
