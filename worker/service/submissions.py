"""Enqueueing as the HTTP API does it: audited as submissions and answered with the records,
under an idempotency key, and in group commits of many callers' jobs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from jobdesk.core import tracing
from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import JobCreate, JobRecord
from jobdesk.service.access import writes
from jobdesk.service.base import ServiceBase
from jobdesk.service.read_models import Enqueued, Submitted
from jobdesk.store import idempotency, job_document, transitions


class Submissions(ServiceBase):
    """Enqueueing for the HTTP API and the CLI: audited, idempotent, in groups."""

    @writes
    async def enqueue_records(self, jobs: Sequence[JobCreate]) -> list[JobRecord]:
        """Enqueue jobs atomically (audited as `submit`); return their records, in the order given."""
        with tracing.enqueueing(jobs):
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

    @writes
    async def enqueue_batch(self, entries: Sequence[tuple[transitions.Actor, JobCreate]]
                            ) -> list[Enqueued | InvalidJob]:
        """Enqueue independent jobs of several callers in one statement and one commit (group
        commit); each entry gets the job that stands for it, as JSON text that PostgreSQL writes
        (`job_document.fetch_job_texts`), or the reason it was refused. When the batch is
        refused, each job is tried alone, so one bad job fails only its own caller.

        No enqueue span here: the batch runs apart from its callers' requests, so each caller
        traces its own job (see `tracing.enqueueing`) before it is queued for the batch."""
        if not entries:
            return []
        jobs = [job for _, job in entries]
        try:
            if all(job.unique_key is None for job in jobs):
                # The common case, in one statement: no job can be a duplicate, and each job's
                # answer comes from the row inserted (no read of the table after the insert).
                async with self.pool.acquire() as conn:
                    rows = await transitions.enqueue_audited(conn, entries, job_document.job_object("ins"))
                    # Committed: workers and listeners hear of the jobs now, from a transaction
                    # that holds the notification lock for no flush (sql/032).
                    await transitions.notify_inserted(conn, rows)
                return [Enqueued(job.id, False, rows[job.id][1]) for job in jobs]
            debounced: set[str] = set()
            async with self.pool.acquire() as conn, conn.transaction():
                placed = await transitions.enqueue_detailed(conn, jobs, debounced)
                # A duplicate created nothing: only the jobs inserted are audited as submitted.
                await transitions.audit_submissions(conn, [(actor, [job_id]) for (actor, _), (job_id, dup)
                                                           in zip(entries, placed) if not dup])
                texts = await job_document.fetch_job_texts(conn, list({i for i, _ in placed}))
                return [Enqueued(job_id, dup, texts[job_id], job.id in debounced)
                        for job, (job_id, dup) in zip(jobs, placed, strict=True)]
        except InvalidJob:
            if len(entries) == 1:
                raise
        out: list[Enqueued | InvalidJob] = []
        for actor, job in entries:
            try:
                debounced = set()
                async with self.pool.acquire() as conn, conn.transaction():
                    [(job_id, dup)] = await transitions.enqueue_detailed(conn, [job], debounced)
                    await transitions.audit_submissions(conn, [] if dup else [(actor, [job_id])])
                    texts = await job_document.fetch_job_texts(conn, [job_id])
                    out.append(Enqueued(job_id, dup, texts[job_id], bool(debounced)))
            except InvalidJob as exc:
                out.append(exc)
        return out

    @writes
    async def enqueue_once(self, owner: str, key: str, fingerprint: str, jobs: Sequence[JobCreate],
                           render: Callable[[list[JobRecord]], Any]) -> Submitted:
        """Enqueue under an idempotency key: the first request with it enqueues and stores its
        answer (`render` of the records); a repeat with the same fingerprint gets that answer
        back and creates nothing; a different fingerprint is an IdempotencyConflict."""
        with tracing.enqueueing(jobs):
            async with self.pool.acquire() as conn, conn.transaction():
                replay = await idempotency.claim(conn, owner, key, fingerprint)
                if replay is not None:
                    return Submitted(replay.status_code, replay.response, replayed=True)
                body = render(await self._enqueue_records(conn, jobs))
                await idempotency.store(conn, owner, key, 201, body)
        return Submitted(201, body, replayed=False)
