"""Reading jobs: a job's record, records in pages (what a backend reads); one job with its
attempts and edges, pages of list rows, counts, waiting reasons (what the console and the API read)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import asyncpg

from jobdesk.core.errors import JobNotFound
from jobdesk.core.job_report import JobProgress
from jobdesk.core.models import JobRecord, Status
from jobdesk.service.base import ServiceBase
from jobdesk.service.read_models import Attempt, JobDetail
from jobdesk.store import job_document, waiting
from jobdesk.store import jobs as job_queries
from jobdesk.store.durable import STEP_DURATION, STEP_ORDER, StepRow
from jobdesk.store.jobs import JobFilter, JobRow, Page, StatusCounts
from jobdesk.store.waiting import WaitingReason

# A job with its attempts and both ends of its edges (in enqueue order), in one statement.
_DETAIL = f"""
SELECT {JobRecord.COLUMNS},
       ARRAY(SELECT e.depends_on_id FROM job_dependencies e JOIN jobs p ON p.id = e.depends_on_id
              WHERE e.job_id = j.id ORDER BY p.seq) AS dependency_ids,
       ARRAY(SELECT e.job_id FROM job_dependencies e JOIN jobs c ON c.id = e.job_id
              WHERE e.depends_on_id = j.id ORDER BY c.seq) AS dependant_ids,
       (SELECT array_agg(ROW(a.attempt, a.worker_id, a.started_at, a.finished_at, a.outcome, a.error_message,
                             a.traceback) ORDER BY a.attempt, a.id)
          FROM job_attempts a WHERE a.job_id = j.id) AS attempt_rows,
       (SELECT array_agg(ROW(s.name, s.result::text, s.attempt, s.started_at, s.finished_at,
                             {STEP_DURATION.format(s='s')}) ORDER BY {STEP_ORDER.format(s='s')})
          FROM job_steps s WHERE s.job_id = j.id) AS step_rows,
       p.fraction AS progress_fraction, p.message AS progress_message, p.at AS progress_at
  FROM jobs j LEFT JOIN job_progress p ON p.job_id = j.id WHERE j.id = $1"""

_RECORD = f"SELECT {JobRecord.COLUMNS} FROM jobs WHERE id = $1"


class JobLookups(ServiceBase):
    """Reading jobs' records: one, several by id, or pages of those matching a filter."""

    async def get_job(self, job_id: str) -> JobRecord:
        pool = await self._read_pool()
        row = await pool.fetchrow(_RECORD, job_id)
        if row is None and pool is not self.pool:  # not on the replica yet: just enqueued, perhaps
            row = await self.pool.fetchrow(_RECORD, job_id)
        if row is None or not self._owns(row["user_id"]):
            raise JobNotFound(f"no job with id {job_id}")
        return JobRecord.from_row(row)

    async def job_records(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """These jobs as they are now, in the order given; ids not found (or not visible) are left out."""
        async with (await self._read_pool()).acquire() as conn:
            return await self._records(conn, job_ids)

    async def job_records_page(self, filt: JobFilter, *, before_seq: int | None = None,
                               limit: int = 50) -> tuple[list[JobRecord], int | None]:
        """Full records newest first, before the enqueue position `before_seq`; and the position
        to ask for next (None on the last page)."""
        async with (await self._read_pool()).acquire() as conn:
            return await job_queries.fetch_records_page(conn, self._scope(filt), before_seq=before_seq, limit=limit)

    async def list_jobs(self, *, status: Status | str | None = None, type: str | None = None,
                        pipeline_id: str | None = None, limit: int = 50) -> list[JobRecord]:
        """Full records, newest first (for scripts; screens page with `job_page`)."""
        filt = JobFilter(statuses=frozenset({Status(status)}) if status else frozenset(), type=type,
                         pipeline_id=pipeline_id)
        records, _ = await self.job_records_page(filt, limit=limit)
        return records


class JobReads(JobLookups):
    """Reading jobs as the console and the HTTP API show them."""

    async def job_detail(self, job_id: str) -> JobDetail:
        """The job, its attempts, what it depends on and what depends on it: one round trip (and
        one more for a queued job's waiting reason). A job not found on the read replica is
        looked for on the primary: it may be too new to have reached the replica."""
        return await self._read_found(lambda pool: self._detail(pool, job_id))

    async def _detail(self, pool: asyncpg.Pool, job_id: str) -> JobDetail:
        async with pool.acquire() as conn:
            row = await conn.fetchrow(_DETAIL, job_id)
            if row is None or not self._owns(row["user_id"]):
                raise JobNotFound(f"no job with id {job_id}")
            reason = await self._reason_if_queued(conn, job_id, row["status"])
        values = dict(row)
        attempts = [Attempt(*a) for a in values.pop("attempt_rows") or []]
        steps = [StepRow(name, json.loads(result) if result is not None else None, attempt, started, finished, took)
                 for name, result, attempt, started, finished, took in values.pop("step_rows") or []]
        dependencies, dependants = values.pop("dependency_ids"), values.pop("dependant_ids")
        fraction, message, at = (values.pop(f"progress_{key}") for key in ("fraction", "message", "at"))
        progress = JobProgress(fraction, message, at) if fraction is not None else None
        return JobDetail(JobRecord.from_row(values), attempts, list(dependencies), list(dependants), reason, steps,
                         progress)

    async def job_detail_json(self, job_id: str) -> str:
        """The job and its attempts as `GET /api/jobs/{id}` answers them, as JSON text that
        PostgreSQL writes (see `worker.job_document`). The route itself reads through
        `job_details_json`, in groups."""
        [answer] = await self.job_details_json([(self, job_id)])
        if isinstance(answer, JobNotFound):
            raise answer
        return answer

    async def job_details_json(self, reads: Sequence[tuple[ServiceBase, str]]) -> list[str | JobNotFound]:
        """`job_detail_json` for several readers at once (group read): one round trip reads every
        document, and each reader sees only the jobs its own scope shows it. Those not found on
        the read replica are looked for on the primary (a job enqueued a moment ago, say)."""
        pool = await self._read_pool()
        answers = await self._documents(pool, reads)
        if pool is not self.pool:
            missed = [i for i, answer in enumerate(answers) if isinstance(answer, JobNotFound)]
            if missed:
                again = await self._documents(self.pool, [reads[i] for i in missed])
                for i, answer in zip(missed, again, strict=True):
                    answers[i] = answer
        return answers

    async def _documents(self, pool: asyncpg.Pool,
                         reads: Sequence[tuple[ServiceBase, str]]) -> list[str | JobNotFound]:
        async with pool.acquire() as conn:
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
        async with (await self._read_pool()).acquire() as conn:
            owner = await conn.fetchrow("SELECT user_id FROM jobs WHERE id = $1", job_id)
            if owner is None or not self._owns(owner["user_id"]):
                raise JobNotFound(f"no job with id {job_id}")
            return await waiting.waiting_reason(conn, job_id, self.settings.JOB_LEASE_TIMEOUT)

    async def job_page(self, filt: JobFilter, *, sort: str = "created", descending: bool = True,
                       after: tuple[Any, int] | None = None, limit: int = 200) -> Page:
        """One keyset page of list rows matching `filt`, after the position `after`."""
        async with (await self._read_pool()).acquire() as conn:
            return await job_queries.fetch_page(conn, self._scope(filt), sort=sort, descending=descending,
                                                after=after, limit=limit)

    async def job_rows(self, job_ids: Sequence[str]) -> list[JobRow]:
        """The current list rows of these jobs; ids that are missing were deleted."""
        async with (await self._read_pool()).acquire() as conn:
            rows = await job_queries.fetch_rows(conn, job_ids)
        return [r for r in rows if self._owns(r.user_id)]

    async def status_counts(self, filt: JobFilter, *, only: Sequence[Status] | None = None) -> StatusCounts:
        """Per-status counts of jobs matching `filt` (ignoring its statuses), capped; of the
        statuses `only` when given (each status counted costs a read of up to the cap)."""
        async with (await self._read_pool()).acquire() as conn:
            return await job_queries.status_counts(conn, self._scope(filt), only=only)
