"""Every change of a job's status, in one place: nothing outside this package writes `jobs.status`.

The worker, the CLI, the HTTP API, the Python client and the console all call these functions,
as `from jobdesk.store import transitions; transitions.enqueue(conn, jobs)`. By role:

- `inserts`: enqueueing jobs (unique keys, the insert audited in the same statement);
- `claim`: the claim statement and the calls that claim and complete in one round trip;
- `outcomes`: what a worker records: completed, failed, put back, unclaimed, cancelled, lost;
- `lost_claims`: the result of a job whose claim a failover undid;
- `actions`: operator actions (cancel, retry, retry with a new input, approve, reject, downstream,
  pipelines) and audit;
- `bulk`: an action on every job a filter matches, a chunk at a time;
- `cascade`: cancelling what depends on a cancelled job.

Worker-side writes are fenced by ownership (a row still `in_progress` under the same worker and
attempt); operator actions lock their rows and check the action is legal for each one. The
rules themselves (which action from which status, the retry rule, who acts) are pure and live in
`jobdesk.core.rules`; they are re-exported here for callers written against this module.
"""

from jobdesk.core.models import Job, JobCreate, ProcessorResult, Status
from jobdesk.core.pg_text import storable_text
from jobdesk.core.rules import (
    BULK_ACTIONS,
    LEGAL_FROM,
    WORKER_COMMANDS_LEGAL_FROM,
    Actor,
    BulkChunk,
    format_exception,
    is_legal,
    retry_decision,
    worker_command_is_legal,
)
from jobdesk.core.validation import check_new_job, json_text
from jobdesk.store.transitions.actions import (
    CONTROL_CHANNEL,
    approve,
    audit,
    audit_submissions,
    cancel,
    cancel_pipeline,
    reject,
    retry,
    retry_downstream,
    retry_plan,
    retry_with_input,
)
from jobdesk.store.transitions.bulk import BULK_CHUNK, bulk_chunk, bulk_filter
from jobdesk.store.transitions.cascade import cancel_downstream
from jobdesk.store.transitions.claim import (
    DUE_BATCH,
    TYPE_LIMIT_LOCK,
    UNION_MAX_TYPES,
    Lane,
    claim_limited,
    claim_statement,
    complete_and_claim,
    flow_claim_statement,
)
from jobdesk.store.transitions.floors import NO_FLOOR, LaneFloors, WalkFloors, before_in_walk, notice_floor
from jobdesk.store.transitions.inserts import (
    DEFAULT_USER_ID,
    KEY_RACE_ATTEMPTS,
    UNFINISHED,
    UNIQUE_CONFLICT,
    enqueue,
    enqueue_audited,
    enqueue_detailed,
    notify_inserted,
)
from jobdesk.store.transitions.lost_claims import complete_lost_claims
from jobdesk.store.transitions.outcomes import (
    FailOutcome,
    complete_batch,
    fail_attempt,
    mark_cancelled,
    put_back,
    release_orphans,
    rescue_lost_jobs,
    unclaim,
)

__all__ = [
    # the rules (jobdesk.core.rules, jobdesk.core.validation) and the models they speak of
    "BULK_ACTIONS", "LEGAL_FROM", "WORKER_COMMANDS_LEGAL_FROM", "Actor", "BulkChunk", "Job", "JobCreate",
    "ProcessorResult", "Status", "check_new_job", "format_exception", "is_legal", "json_text", "retry_decision",
    "storable_text", "worker_command_is_legal",
    # enqueue
    "DEFAULT_USER_ID", "KEY_RACE_ATTEMPTS", "UNFINISHED", "UNIQUE_CONFLICT", "enqueue", "enqueue_audited",
    "enqueue_detailed", "notify_inserted",
    # claim
    "DUE_BATCH", "TYPE_LIMIT_LOCK", "UNION_MAX_TYPES", "Lane", "claim_limited", "claim_statement",
    "complete_and_claim", "flow_claim_statement", "NO_FLOOR", "LaneFloors", "WalkFloors", "before_in_walk",
    "notice_floor",
    # the worker's outcomes
    "FailOutcome", "complete_batch", "fail_attempt", "mark_cancelled", "put_back",
    "release_orphans", "rescue_lost_jobs", "unclaim", "complete_lost_claims",
    # operator actions
    "CONTROL_CHANNEL", "approve", "audit", "audit_submissions", "cancel", "cancel_downstream", "cancel_pipeline",
    "reject", "retry", "retry_downstream", "retry_plan", "retry_with_input",
    # bulk actions
    "BULK_CHUNK", "bulk_chunk", "bulk_filter",
]
