"""The one typed service every front door uses: the CLI, the console, the HTTP API and Python
backends read and act through `JobService`, and none of them writes SQL of its own.

    async with await JobService.connect(source="cli") as jobs:
        job_id = await jobs.enqueue("echo", {"hello": "world"})
        detail = await jobs.job_detail(job_id)

A service holds a pool and an actor (who acts, for the audit log). `as_actor` gives a view on the
same pool for another actor, optionally restricted to one user's jobs: an HTTP request made with
a user's token sees and acts on that user's jobs only, and another user's job is "not found".
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, NamedTuple

import asyncpg

from worker.core.dag import dependency_order
from worker.core.errors import DatabaseUnavailable, InvalidJob, JobNotFound
from worker.core.models import JobCreate, JobRecord, Status
from worker.core.schedules import Schedule
from worker.core.settings import Settings, load_settings
from worker.runtime import retention, scheduler
from worker.runtime.scheduler import ScheduledJob, ScheduleRecord
from worker.store import failures as failure_queries
from worker.store import fleet, idempotency, job_document, tokens, transitions, waiting
from worker.store import jobs as job_queries
from worker.store import pipelines as pipeline_queries
from worker.store import stats as stats_queries
from worker.store.db import Database, connect, create_pool
from worker.store.failures import FailureGroup, FailureSample
from worker.store.fleet import UnservedType, WorkerRecord
from worker.store.jobs import JobFilter, JobRow, Page, StatusCounts
from worker.store.migrations import Migration, migrate, pending_migrations
from worker.store.pipelines import GraphNode, PipelineFilter, PipelineRow, PipelineStep
from worker.store.stats import Attention, Metrics, TableSize, Transition, Window
from worker.store.tokens import TokenRecord
from worker.store.waiting import WaitingReason


async def ensure_schema(conn: asyncpg.Connection, *, embedded: bool) -> None:
    """Migrate the embedded database on the fly; ask for `jobdesk migrate` anywhere else."""
    if embedded:
        await migrate(conn)
        return
    pending = await pending_migrations(conn)
    if pending:
        first = pending[0]
        raise DatabaseUnavailable(f"the database schema is not up to date ({len(pending)} migration(s) "
                                  f"pending, from {first.version:03d}_{first.name}); run `jobdesk migrate`")


async def prepare_schema(dsn: str, *, embedded: bool) -> None:
    """Check the schema over one short connection (migrating the embedded database)."""
    conn = await connect(dsn)
    try:
        await ensure_schema(conn, embedded=embedded)
    finally:
        await conn.close()


async def migrate_database(dsn: str) -> list[Migration]:
    """Apply the pending migrations; return those applied."""
    conn = await connect(dsn)
    try:
        return await migrate(conn)
    finally:
        await conn.close()


class Enqueued(NamedTuple):
    """A job `enqueue_batch` placed: the id that stands for it, whether it was a duplicate (an
    unfinished job held its unique key, so nothing was created), and that job as JSON text."""

    id: str
    duplicate: bool
    document: str


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


# A job with its attempts and both ends of its edges (in enqueue order), in one statement.
_DETAIL = f"""
SELECT {JobRecord.COLUMNS},
       ARRAY(SELECT e.depends_on_id FROM job_dependencies e JOIN jobs p ON p.id = e.depends_on_id
              WHERE e.job_id = j.id ORDER BY p.seq) AS dependency_ids,
       ARRAY(SELECT e.job_id FROM job_dependencies e JOIN jobs c ON c.id = e.job_id
              WHERE e.depends_on_id = j.id ORDER BY c.seq) AS dependant_ids,
       (SELECT array_agg(ROW(a.attempt, a.worker_id, a.started_at, a.finished_at, a.outcome, a.error_message,
                             a.traceback) ORDER BY a.attempt, a.id)
          FROM job_attempts a WHERE a.job_id = j.id) AS attempt_rows
  FROM jobs j WHERE j.id = $1"""


class JobService:
    """Reads and actions on jobs, pipelines and workers, over one pool."""

    def __init__(self, pool: asyncpg.Pool, *, source: str = "api", actor: transitions.Actor | None = None,
                 user_id: int | None = None, settings: Settings | None = None) -> None:
        self.pool = pool
        self.actor = actor or transitions.Actor.current(source)
        self.user_id = user_id  # set: only this user's jobs are visible
        self.settings = settings or load_settings()

    @classmethod
    async def connect(cls, database: Database | str | None = None, *, settings: Settings | None = None,
                      source: str = "api", pool_size: int | None = None, plan_each_call: bool = False,
                      indexes_only: bool = False) -> JobService:
        """A service on `database` (a `Database`, a URL, or None for DATABASE_URL or else the
        embedded default), schema checked: the embedded database is migrated on the fly.

        `plan_each_call` (the console's) plans each statement for its call, and `indexes_only`
        (the HTTP API's) keeps its kept plans on the indexes: see `create_pool`."""
        settings = settings or load_settings()
        if database is None:
            database = Database.resolve(settings)
        elif isinstance(database, str):
            database = Database.given(database, settings)
        pool = await create_pool(database.dsn, size=pool_size or settings.DB_POOL_SIZE,
                                 statement_timeout=settings.JOB_STATEMENT_TIMEOUT,
                                 application_name=f"jobdesk-{source}", plan_each_call=plan_each_call,
                                 indexes_only=indexes_only)
        try:
            async with pool.acquire() as conn:
                await ensure_schema(conn, embedded=database.embedded)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, source=source, settings=settings)

    def as_actor(self, actor: transitions.Actor, *, user_id: int | None = None) -> JobService:
        """The same service for another actor, restricted to `user_id`'s jobs when given."""
        return type(self)(self.pool, actor=actor, user_id=user_id, settings=self.settings)

    async def notify(self, channel: str, payload: str) -> None:
        """Send a NOTIFY through the pool: a listener's heartbeat takes the path real changes take."""
        await self.pool.execute("SELECT pg_notify($1, $2)", channel, payload)

    async def close(self) -> None:
        await self.pool.close()

    def terminate(self) -> None:
        """Drop every connection now (the database went away)."""
        self.pool.terminate()

    async def __aenter__(self) -> JobService:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- enqueue ----------------------------------------------------------------------------

    async def enqueue(self, type: str, input_data: dict[str, Any], *, depends_on: Sequence[str] = (),
                      user_id: int | None = None, pipeline_id: str | None = None, priority: int = 0,
                      id: str | None = None, scheduled_at: datetime | None = None,
                      unique_key: str | None = None) -> str:
        """Enqueue one job; return its id (that of the unfinished job holding `unique_key`, if one does)."""
        job = JobCreate(type, input_data, dependent_on_jobs=list(depends_on), user_id=user_id,
                        pipeline_id=pipeline_id, priority=priority, scheduled_at=scheduled_at,
                        unique_key=unique_key)
        if id is not None:
            job.id = id
        return (await self.enqueue_many([job]))[0]

    async def enqueue_many(self, jobs: Sequence[JobCreate]) -> list[str]:
        """Enqueue jobs (which may depend on each other) atomically; return their ids."""
        if self.user_id is not None:
            for job in jobs:
                job.user_id = self.user_id
        async with self.pool.acquire() as conn, conn.transaction():
            if self.user_id is not None:
                await self._check_visible(conn, [d for j in jobs for d in j.dependent_on_jobs
                                                 if d not in {x.id for x in jobs}])
            return await transitions.enqueue(conn, jobs)

    async def enqueue_records(self, jobs: Sequence[JobCreate]) -> list[JobRecord]:
        """Enqueue jobs atomically (audited as `submit`); return their records, in the order given."""
        async with self.pool.acquire() as conn, conn.transaction():
            return await self._enqueue_records(conn, jobs)

    async def _enqueue_records(self, conn: asyncpg.Connection, jobs: Sequence[JobCreate]) -> list[JobRecord]:
        if self.user_id is not None:
            for job in jobs:
                job.user_id = self.user_id
            await self._check_visible(conn, [d for j in jobs for d in j.dependent_on_jobs
                                             if d not in {x.id for x in jobs}])
        out = await transitions.enqueue_detailed(conn, jobs)
        await transitions.audit_submissions(conn, [(self.actor, [i for i, dup in out if not dup])])
        return await self._records(conn, [i for i, _ in out])

    async def _records(self, conn: asyncpg.Connection, ids: Sequence[str]) -> list[JobRecord]:
        rows = await conn.fetch(f"SELECT {JobRecord.COLUMNS} FROM jobs WHERE id = ANY($1::text[])", list(ids))
        by_id = {r["id"]: JobRecord.from_row(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id and self._owns(by_id[i].user_id)]

    async def enqueue_batch(self, entries: Sequence[tuple[transitions.Actor, JobCreate]]
                            ) -> list[Enqueued | InvalidJob]:
        """Enqueue independent jobs of several callers in one statement and one commit (group
        commit); each entry gets the job that stands for it, as JSON text that PostgreSQL writes
        (`job_document.fetch_job_texts`), or the reason it was refused. When the batch is
        refused, each job is tried alone, so one bad job fails only its own caller."""
        if not entries:
            return []
        jobs = [job for _, job in entries]
        try:
            if all(job.unique_key is None for job in jobs):
                # The common case, in one statement: no job can be a duplicate, and each job's
                # answer comes from the row inserted (no read of the table after the insert).
                async with self.pool.acquire() as conn:
                    rows = await transitions.enqueue_audited(conn, entries, job_document.job_object("ins"))
                return [Enqueued(job.id, False, rows[job.id][1]) for job in jobs]
            async with self.pool.acquire() as conn, conn.transaction():
                placed = await transitions.enqueue_detailed(conn, jobs)
                # A duplicate created nothing: only the jobs inserted are audited as submitted.
                await transitions.audit_submissions(conn, [(actor, [job_id]) for (actor, _), (job_id, dup)
                                                           in zip(entries, placed) if not dup])
                texts = await job_document.fetch_job_texts(conn, list({i for i, _ in placed}))
                return [Enqueued(job_id, dup, texts[job_id]) for job_id, dup in placed]
        except InvalidJob:
            if len(entries) == 1:
                raise
        out: list[Enqueued | InvalidJob] = []
        for actor, job in entries:
            try:
                async with self.pool.acquire() as conn, conn.transaction():
                    [(job_id, dup)] = await transitions.enqueue_detailed(conn, [job])
                    await transitions.audit_submissions(conn, [] if dup else [(actor, [job_id])])
                    texts = await job_document.fetch_job_texts(conn, [job_id])
                    out.append(Enqueued(job_id, dup, texts[job_id]))
            except InvalidJob as exc:
                out.append(exc)
        return out

    async def enqueue_once(self, owner: str, key: str, fingerprint: str, jobs: Sequence[JobCreate],
                           render: Callable[[list[JobRecord]], Any]) -> Submitted:
        """Enqueue under an idempotency key: the first request with it enqueues and stores its
        answer (`render` of the records); a repeat with the same fingerprint gets that answer
        back and creates nothing; a different fingerprint is an IdempotencyConflict."""
        async with self.pool.acquire() as conn, conn.transaction():
            replay = await idempotency.claim(conn, owner, key, fingerprint)
            if replay is not None:
                return Submitted(replay.status_code, replay.response, replayed=True)
            body = render(await self._enqueue_records(conn, jobs))
            await idempotency.store(conn, owner, key, 201, body)
        return Submitted(201, body, replayed=False)

    async def create_pipeline(self, jobs: Sequence[JobCreate], *, pipeline_id: str | None = None) -> str:
        """Enqueue a DAG of jobs as one pipeline; return the pipeline id."""
        pid = pipeline_id or str(uuid.uuid4())
        for job in jobs:
            job.pipeline_id = pid
        await self.enqueue_many(jobs)
        return pid

    # -- jobs -------------------------------------------------------------------------------

    async def get_job(self, job_id: str) -> JobRecord:
        row = await self.pool.fetchrow(f"SELECT {JobRecord.COLUMNS} FROM jobs WHERE id = $1", job_id)
        if row is None or not self._owns(row["user_id"]):
            raise JobNotFound(f"no job with id {job_id}")
        return JobRecord.from_row(row)

    async def job_records(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """These jobs as they are now, in the order given; ids not found (or not visible) are left out."""
        async with self.pool.acquire() as conn:
            return await self._records(conn, job_ids)

    async def job_detail(self, job_id: str) -> JobDetail:
        """The job, its attempts, what it depends on and what depends on it: one round trip (and
        one more for a queued job's waiting reason)."""
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(_DETAIL, job_id)
            if row is None or not self._owns(row["user_id"]):
                raise JobNotFound(f"no job with id {job_id}")
            reason = await self._reason_if_queued(conn, job_id, row["status"])
        values = dict(row)
        attempts = [Attempt(*a) for a in values.pop("attempt_rows") or []]
        dependencies, dependants = values.pop("dependency_ids"), values.pop("dependant_ids")
        return JobDetail(JobRecord.from_row(values), attempts, list(dependencies), list(dependants), reason)

    async def job_detail_json(self, job_id: str) -> str:
        """The job and its attempts as `GET /api/jobs/{id}` answers them, as JSON text that
        PostgreSQL writes (see `worker.job_document`). The route itself reads through
        `job_details_json`, in groups."""
        [answer] = await self.job_details_json([(self, job_id)])
        if isinstance(answer, JobNotFound):
            raise answer
        return answer

    async def job_details_json(self, reads: Sequence[tuple[JobService, str]]) -> list[str | JobNotFound]:
        """`job_detail_json` for several readers at once (group read): one round trip reads every
        document, and each reader sees only the jobs its own scope shows it."""
        async with self.pool.acquire() as conn:
            documents = await job_document.fetch_documents(conn, list({job_id for _, job_id in reads}))
            reasons: dict[str, str | None] = {}  # a queued job's reason is read once per batch
            answers: list[str | JobNotFound] = []
            for reader, job_id in reads:
                doc = documents.get(job_id)
                if doc is None or not reader._owns(doc.user_id):
                    answers.append(JobNotFound(f"no job with id {job_id}"))
                    continue
                if job_id not in reasons:
                    reason = await self._reason_if_queued(conn, job_id, doc.status)
                    reasons[job_id] = reason.text if reason is not None else None
                answers.append(job_document.with_waiting_reason(doc.text, reasons[job_id]))
        return answers

    async def _reason_if_queued(self, conn: asyncpg.Connection, job_id: str, status: str) -> WaitingReason | None:
        """Why the job has not started, read only when its status says it is queued."""
        return await waiting.waiting_reason(conn, job_id, self.settings.JOB_LEASE_TIMEOUT) \
            if status == Status.QUEUED else None

    async def waiting_reason(self, job_id: str) -> WaitingReason | None:
        """Why this queued job has not started; None when it is not queued."""
        async with self.pool.acquire() as conn:
            owner = await conn.fetchrow("SELECT user_id FROM jobs WHERE id = $1", job_id)
            if owner is None or not self._owns(owner["user_id"]):
                raise JobNotFound(f"no job with id {job_id}")
            return await waiting.waiting_reason(conn, job_id, self.settings.JOB_LEASE_TIMEOUT)

    async def job_records_page(self, filt: JobFilter, *, before_seq: int | None = None,
                               limit: int = 50) -> tuple[list[JobRecord], int | None]:
        """Full records newest first, before the enqueue position `before_seq`; and the position
        to ask for next (None on the last page)."""
        async with self.pool.acquire() as conn:
            return await job_queries.fetch_records_page(conn, self._scope(filt), before_seq=before_seq, limit=limit)

    async def list_jobs(self, *, status: Status | str | None = None, type: str | None = None,
                        pipeline_id: str | None = None, limit: int = 50) -> list[JobRecord]:
        """Full records, newest first (for scripts; screens page with `job_page`)."""
        filt = JobFilter(statuses=frozenset({Status(status)}) if status else frozenset(), type=type,
                         pipeline_id=pipeline_id)
        records, _ = await self.job_records_page(filt, limit=limit)
        return records

    async def job_page(self, filt: JobFilter, *, sort: str = "created", descending: bool = True,
                       after: tuple[Any, int] | None = None, limit: int = 200) -> Page:
        """One keyset page of list rows matching `filt`, after the position `after`."""
        async with self.pool.acquire() as conn:
            return await job_queries.fetch_page(conn, self._scope(filt), sort=sort, descending=descending,
                                                after=after, limit=limit)

    async def job_rows(self, job_ids: Sequence[str]) -> list[JobRow]:
        """The current list rows of these jobs; ids that are missing were deleted."""
        async with self.pool.acquire() as conn:
            rows = await job_queries.fetch_rows(conn, job_ids)
        return [r for r in rows if self._owns(r.user_id)]

    async def status_counts(self, filt: JobFilter) -> StatusCounts:
        """Per-status counts of jobs matching `filt` (ignoring its statuses), capped."""
        async with self.pool.acquire() as conn:
            return await job_queries.status_counts(conn, self._scope(filt))

    # -- pipelines --------------------------------------------------------------------------

    async def pipelines(self, filt: PipelineFilter, *, after_seq: int | None = None,
                        limit: int = 200) -> tuple[list[PipelineRow], bool]:
        """One page of the pipeline list, newest first, and whether more follow."""
        async with self.pool.acquire() as conn:
            return await pipeline_queries.fetch_pipelines(conn, filt, after_seq=after_seq, limit=limit)

    async def pipeline_changes(self, job_ids: Collection[str],
                               filt: PipelineFilter) -> tuple[set[str], list[PipelineRow]]:
        """The pipelines these jobs belong to, and the list rows of those that match `filt`."""
        async with self.pool.acquire() as conn:
            pipeline_ids = await pipeline_queries.pipelines_of(conn, sorted(job_ids))
            if not pipeline_ids:
                return pipeline_ids, []
            return pipeline_ids, await pipeline_queries.fetch_pipeline_rows(conn, sorted(pipeline_ids), filt)

    async def pipeline_rows(self, pipeline_ids: Sequence[str],
                            filt: PipelineFilter = PipelineFilter()) -> list[PipelineRow]:  # noqa: B008
        async with self.pool.acquire() as conn:
            return await pipeline_queries.fetch_pipeline_rows(conn, pipeline_ids, filt)

    async def pipeline_graph(self, pipeline_id: str, *,
                             limit: int = pipeline_queries.GRAPH_LIMIT) -> tuple[list[GraphNode], bool]:
        """The pipeline's jobs in enqueue order (at most `limit`), and whether there are more."""
        async with self.pool.acquire() as conn:
            return await pipeline_queries.fetch_graph(conn, pipeline_id, limit=limit)

    async def pipeline_steps(self, pipeline_id: str) -> PipelineSteps:
        """The step indicator of a pipeline: derived status, progress, jobs in dependency order."""
        async with self.pool.acquire() as conn:
            await self._check_pipeline_visible(conn, pipeline_id)
            rows = await pipeline_queries.fetch_pipeline_rows(conn, [pipeline_id])
            if not rows:
                raise JobNotFound(f"no pipeline with id {pipeline_id}")
            steps = await pipeline_queries.fetch_steps(conn, pipeline_id)
        by_id = {s.id: s for s in steps}
        ordered = [by_id[i] for i in dependency_order([(s.id, s.dependent_on_jobs) for s in steps])]
        row = rows[0]
        return PipelineSteps(pipeline_id, row.name, str(row.status), row.completed, row.total, ordered)

    async def retryable_in(self, pipeline_id: str) -> list[str]:
        """The failed and cancelled jobs of a pipeline, in enqueue order."""
        async with self.pool.acquire() as conn:
            return await pipeline_queries.retryable_in(conn, pipeline_id)

    # -- metrics ----------------------------------------------------------------------------

    async def metrics(self, window: Window) -> Metrics:
        """Throughput, queue depth and wait/run percentiles per type over `window` (all users)."""
        async with self.pool.acquire() as conn:
            return await stats_queries.fetch_metrics(conn, window)

    async def table_size(self) -> TableSize:
        """The jobs table's estimated row count and its size on disk, indexes included."""
        async with self.pool.acquire() as conn:
            return await stats_queries.fetch_table_size(conn)

    async def attention(self) -> Attention:
        """Jobs failed for good in the last hour and jobs waiting for approval, and the database's clock."""
        async with self.pool.acquire() as conn:
            return await stats_queries.fetch_attention(conn)

    async def transitions_since(self, since: datetime, *, limit: int = 500) -> list[Transition]:
        """Jobs that failed for good or started waiting for approval after `since`."""
        async with self.pool.acquire() as conn:
            found = await stats_queries.fetch_transitions(conn, since, limit=limit)
        if self.user_id is None:
            return found
        mine = {r.id for r in await self.job_rows([t.id for t in found])}
        return [t for t in found if t.id in mine]

    # -- workers ----------------------------------------------------------------------------

    async def workers(self, *, include_stopped: bool = True) -> list[WorkerRecord]:
        async with self.pool.acquire() as conn:
            return await fleet.list_workers(conn, include_stopped=include_stopped)

    async def workers_view(self, lease_timeout_s: float, *, served_before: frozenset[str] | None = None,
                           with_unserved: bool = False) -> WorkersView:
        """Every worker, the types live workers serve, and the unserved queued types when asked
        for (or when the served types changed since `served_before`)."""
        async with self.pool.acquire() as conn:
            workers = await fleet.list_workers(conn)
            served = frozenset(t for w in workers if w.state in fleet.LIVE_STATES
                               and not w.is_lost(lease_timeout_s) for t in w.job_types)
            unserved = None
            if with_unserved or served != served_before:
                unserved = await fleet.unserved_types(conn, lease_timeout_s)
        return WorkersView(workers, served, unserved)

    async def worker_command(self, worker_id: str, command: str) -> WorkerRecord:
        """Ask a worker to pause, resume, drain or stop; the worker acts on it at once."""
        async with self.pool.acquire() as conn:
            return await fleet.request(conn, worker_id, command)

    async def prune(self, *, dry_run: bool = False, older_than: float | None = None,
                    statuses: Sequence[str] = ()) -> retention.PruneResult:
        """Prune now, as a worker's pruner does: finished jobs past their retention (or past
        `older_than` seconds), for `statuses` (default: completed, cancelled, failed and the
        audit log). A dry run counts and changes nothing. PruneBusy if a pruner is running."""
        unknown = [s for s in statuses if s not in retention.PRUNABLE]
        if unknown:
            raise InvalidJob(f"cannot prune {unknown[0]!r}; use {', '.join(retention.PRUNABLE)}")
        keep = retention.cutoffs(self.settings)
        chosen = {s: (older_than if older_than is not None else keep[s])
                  for s in retention.PRUNABLE if not statuses or s in statuses}
        holder = f"{self.actor.source} on {socket.gethostname()}, pid {os.getpid()}"
        result = await retention.prune(self.pool, holder, chosen,
                                       failed_retention=self.settings.JOB_RETENTION_FAILED, dry_run=dry_run)
        if result is None:
            async with self.pool.acquire() as conn:
                running = await retention.lease_holder(conn)
            raise retention.PruneBusy(f"another pruner is running ({running or 'a worker'}); try again shortly")
        return result

    async def can_write(self) -> bool:
        """Whether this database role may act on jobs here (not a replica, not read-only)."""
        return bool(await self.pool.fetchval(
            "SELECT has_table_privilege(current_user, 'jobs', 'UPDATE') "
            "AND NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'"))

    # -- schedules --------------------------------------------------------------------------

    async def schedules(self) -> list[ScheduleRecord]:
        async with self.pool.acquire() as conn:
            return await scheduler.list_schedules(conn)

    async def schedule_jobs(self, name: str, *, limit: int = 50) -> list[ScheduledJob]:
        """The newest ticks of a schedule and the jobs they made."""
        async with self.pool.acquire() as conn:
            return await scheduler.jobs_of(conn, name, limit=limit)

    async def add_schedule(self, schedule: Schedule) -> ScheduleRecord:
        async with self.pool.acquire() as conn, conn.transaction():
            record = await scheduler.add(conn, schedule, source=self.actor.source)
            await transitions.audit(conn, self.actor, "add-schedule", schedule.name)
        return record

    async def declare_schedules(self, declared: Sequence[tuple[Schedule, str]]) -> None:
        """Upsert the SCHEDULES processor modules declare (a worker does this as it starts)."""
        async with self.pool.acquire() as conn, conn.transaction():
            for schedule, origin in declared:
                await scheduler.add(conn, schedule, source=origin, replace=True)

    async def pause_schedule(self, name: str) -> ScheduleRecord:
        return await self._set_paused(name, True)

    async def resume_schedule(self, name: str) -> ScheduleRecord:
        return await self._set_paused(name, False)

    async def _set_paused(self, name: str, paused: bool) -> ScheduleRecord:
        async with self.pool.acquire() as conn, conn.transaction():
            record = await scheduler.set_paused(conn, name, paused)
            await transitions.audit(conn, self.actor, "pause-schedule" if paused else "resume-schedule", name)
        return record

    async def remove_schedule(self, name: str) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await scheduler.remove(conn, name)
            await transitions.audit(conn, self.actor, "remove-schedule", name)

    # -- operator actions -------------------------------------------------------------------

    async def cancel(self, job_ids: Sequence[str]) -> list[str]:
        """Cancel jobs and everything downstream; return every id cancelled."""
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.cancel(conn, job_ids, self.actor)

    async def retry(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.retry(conn, job_ids, self.actor)

    async def approve(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.approve(conn, job_ids, self.actor)

    async def reject(self, job_ids: Sequence[str], reason: str) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.reject(conn, job_ids, reason, self.actor)

    async def retry_plan(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        """What `retry_downstream` would touch (id, type, status), without changing anything."""
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return [dict(r) for r in await transitions.retry_plan(conn, job_ids)]

    async def retry_downstream(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.retry_downstream(conn, job_ids, self.actor)

    async def cancel_pipeline(self, pipeline_id: str) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_pipeline_visible(conn, pipeline_id)
            return await transitions.cancel_pipeline(conn, pipeline_id, self.actor)

    async def retry_pipeline(self, pipeline_id: str) -> list[str]:
        """Retry every failed or cancelled job of a pipeline and what follows them."""
        async with self.pool.acquire() as conn:
            await self._check_pipeline_visible(conn, pipeline_id)
            ids = await pipeline_queries.retryable_in(conn, pipeline_id)
            if not ids:
                return []
            return await transitions.retry_downstream(conn, ids, self.actor)

    # -- the HTTP API's own --------------------------------------------------------------------

    async def ping(self) -> None:
        """Raise if the database does not answer."""
        await self.pool.fetchval("SELECT 1")

    async def active_counts(self, cap: int = job_queries.COUNT_CAP) -> dict[tuple[str, str], int]:
        """Queued, running and failed jobs per (type, status), each status counted up to `cap`."""
        async with self.pool.acquire() as conn:
            return await job_queries.type_status_counts(conn, ["queued", "in_progress", "failed"], cap)

    async def create_token(self, name: str, *, user_id: int | None = None, scopes: list[str] | None = None) -> str:
        async with self.pool.acquire() as conn:
            return await tokens.create(conn, name, user_id=user_id, scopes=scopes)

    async def list_tokens(self) -> list[TokenRecord]:
        async with self.pool.acquire() as conn:
            return await tokens.list_live(conn)

    async def revoke_token(self, name: str) -> None:
        async with self.pool.acquire() as conn:
            await tokens.revoke(conn, name)

    async def authenticate(self, token: str) -> TokenRecord | None:
        async with self.pool.acquire() as conn:
            return await tokens.lookup(conn, token)

    async def has_tokens(self) -> bool:
        async with self.pool.acquire() as conn:
            return await tokens.any_live(conn)

    # -- bulk actions on a filter -----------------------------------------------------------

    async def bulk_count(self, action: str, filt: JobFilter, *, cap: int = BULK_COUNT_CAP) -> BulkCount:
        """Dry run of a bulk `action` ("retry" or "cancel"): how many jobs matching `filt` it
        would act on (those it is legal for), counted up to `cap`."""
        narrowed = transitions.bulk_filter(action, self._scope(filt))
        if narrowed is None:
            return BulkCount(action, filt, 0, False, None)
        params: list[Any] = []
        where = narrowed.where(params)
        params.append(cap + 1)
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(f"SELECT count(*) AS n, max(seq) AS last FROM "
                                      f"(SELECT seq FROM jobs WHERE {where} LIMIT ${len(params)}) AS capped", *params)
        n = int(row["n"])
        if n > cap:  # counting stopped: the run is not bounded by what was counted
            return BulkCount(action, filt, cap, True, None)
        return BulkCount(action, filt, n, False, row["last"])

    async def bulk_apply(self, action: str, filt: JobFilter, *, after_seq: int = 0, upto_seq: int | None = None,
                         limit: int = transitions.BULK_CHUNK) -> transitions.BulkChunk:
        """One chunk of a bulk action: retry or cancel the next `limit` (at most 1,000) jobs
        matching `filt` after `after_seq`, in one transaction and one audit row. Call again with
        the chunk's `next_seq` until it is None."""
        async with self.pool.acquire() as conn:
            return await transitions.bulk_chunk(conn, action, self._scope(filt), self.actor, after_seq=after_seq,
                                                upto_seq=upto_seq, limit=limit)

    async def bulk_run(self, action: str, filt: JobFilter, *, upto_seq: int | None = None,
                       limit: int = transitions.BULK_CHUNK) -> AsyncIterator[transitions.BulkChunk]:
        """Every chunk of a bulk action, one after another (stop iterating to stop the run)."""
        after = 0
        while True:
            chunk = await self.bulk_apply(action, filt, after_seq=after, upto_seq=upto_seq, limit=limit)
            yield chunk
            if chunk.next_seq is None:
                return
            after = chunk.next_seq

    async def bulk(self, action: str, filt: JobFilter, *, dry_run: bool = False) -> BulkResult:
        """A whole bulk action (or its dry run), for front doors without a progress bar."""
        count = await self.bulk_count(action, filt)
        if dry_run:
            return BulkResult(action, filt, count.count, count.capped, dry_run=True)
        result = BulkResult(action, filt, 0, False, dry_run=False)
        async for chunk in self.bulk_run(action, filt, upto_seq=count.upto_seq):
            result.count += len(chunk.picked)
            result.changed += len(chunk.changed)
            result.chunks += 1 if chunk.picked else 0
        return result

    # -- failures ---------------------------------------------------------------------------

    async def failure_groups(self, *, hours: int = failure_queries.WINDOW_HOURS) -> list[FailureGroup]:
        """Failed jobs, and failed attempts of the last `hours`, grouped by error fingerprint."""
        async with self.pool.acquire() as conn:
            return await failure_queries.failure_groups(conn, hours=hours, user_id=self.user_id)

    async def failure_sample(self, fingerprint: str, *,
                             hours: int = failure_queries.WINDOW_HOURS) -> FailureSample | None:
        """The newest failure of a group, with its traceback."""
        async with self.pool.acquire() as conn:
            return await failure_queries.failure_sample(conn, fingerprint, hours=hours, user_id=self.user_id)

    # -- visibility -------------------------------------------------------------------------

    def _owns(self, user_id: int | None) -> bool:
        return self.user_id is None or user_id == self.user_id

    def _scope(self, filt: JobFilter) -> JobFilter:
        if self.user_id is None:
            return filt
        if filt.user_id is not None and filt.user_id != self.user_id:
            return JobFilter(statuses=filt.statuses, user_id=-1)  # matches nothing
        from dataclasses import replace

        return replace(filt, user_id=self.user_id)

    async def _check_visible(self, conn: asyncpg.Connection, job_ids: Sequence[str]) -> None:
        """For a user-bound service: another user's job is reported as not found."""
        if self.user_id is None or not job_ids:
            return
        rows = await conn.fetch("SELECT id FROM jobs WHERE id = ANY($1::text[]) AND user_id = $2",
                                list(job_ids), self.user_id)
        mine = {r["id"] for r in rows}
        for job_id in job_ids:
            if job_id not in mine:
                raise JobNotFound(f"no job with id {job_id}")

    async def _check_pipeline_visible(self, conn: asyncpg.Connection, pipeline_id: str) -> None:
        if self.user_id is None:
            return
        owner = await conn.fetchval("SELECT user_id FROM jobs WHERE pipeline_id = $1 ORDER BY seq LIMIT 1",
                                    pipeline_id)
        if owner != self.user_id:
            raise JobNotFound(f"no pipeline with id {pipeline_id}")
