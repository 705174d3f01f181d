"""What the service answers with: the read models of jobs, pipelines, workers and bulk actions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from jobdesk.core.job_report import JobLogLine as JobLogLine  # re-exported: the front doors name it from here
from jobdesk.core.job_report import JobProgress as JobProgress
from jobdesk.core.models import JobRecord
from jobdesk.store.durable import StepRow as StepRow  # re-exported: the front doors name it from here
from jobdesk.store.fleet import UnservedType, WorkerRecord
from jobdesk.store.jobs import JobFilter
from jobdesk.store.pipelines import PipelineStep
from jobdesk.store.waiting import WaitingReason


class Enqueued(NamedTuple):
    """A job `enqueue_batch` placed: the id that stands for it, whether it was a duplicate (an
    unfinished job held its unique key, so nothing was created), that job as JSON text, and
    whether the duplicate debounced that queued job (it took the new input and start)."""

    id: str
    duplicate: bool
    document: str
    debounced: bool = False


@dataclass
class Attempt:
    """One failed, lost, interrupted or cancelled attempt of a job."""

    attempt: int
    worker_id: str | None
    started_at: datetime | None
    finished_at: datetime
    outcome: str
    error_message: str | None
    traceback: str | None

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        for key in ("started_at", "finished_at"):
            out[key] = out[key].isoformat() if out[key] else None
        return out


@dataclass
class JobDetail:
    """One job with everything a detail view shows: its attempts, the jobs it depends on and
    the jobs that depend on it (ids, in enqueue order)."""

    job: JobRecord
    attempts: list[Attempt] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)
    dependants: list[str] = field(default_factory=list)
    waiting: WaitingReason | None = None  # why a queued job has not started; None when not queued
    steps: list[StepRow] = field(default_factory=list)  # a durable processor's stored steps
    progress: JobProgress | None = None  # how far the job got, as its processor last said

    @property
    def waiting_reason(self) -> str | None:
        return self.waiting.text if self.waiting is not None else None


@dataclass
class PipelineSteps:
    """A pipeline as a step indicator shows it: its name, derived status and progress, and its
    jobs parents first."""

    pipeline_id: str
    name: str
    status: str
    completed: int
    total: int
    steps: list[PipelineStep]


@dataclass
class Submitted:
    """The answer to an enqueue that carried an idempotency key: fresh, or replayed."""

    status_code: int
    body: Any
    replayed: bool


@dataclass
class WorkersView:
    """The fleet as the Workers panel shows it: every worker, the job types live workers serve,
    and (when asked for) the queued types that none serves."""

    workers: list[WorkerRecord]
    served: frozenset[str]
    unserved: list[UnservedType] | None


BULK_COUNT_CAP = 1_000_000  # a dry run counts this far


@dataclass(frozen=True)
class BulkCount:
    """A bulk action's dry run: how many jobs it would act on now."""

    action: str
    filter: JobFilter
    count: int
    capped: bool  # counting stopped at `count`: there are more
    upto_seq: int | None  # the last matching job; a run bounded here leaves out later ones

    def describe(self) -> str:
        return f"{self.count:,}{'+' if self.capped else ''}"


@dataclass
class BulkResult:
    """What a whole bulk action did (or, as a dry run, would do)."""

    action: str
    filter: JobFilter
    count: int  # jobs matched and acted on (dry run: that would be)
    capped: bool
    dry_run: bool
    changed: int = 0  # jobs changed, dependants included
    chunks: int = 0  # transactions, one audit row each
