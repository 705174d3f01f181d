"""An operator's actions on jobs and pipelines: cancel, retry, approve, reject."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobdesk.core.errors import JobNotFound
from jobdesk.service.access import acts
from jobdesk.service.base import ServiceBase
from jobdesk.store import pipelines as pipeline_queries
from jobdesk.store import transitions
from jobdesk.store.jobs import fetch_records

if TYPE_CHECKING:
    from jobdesk.core.input_validation import Validator


class OperatorActions(ServiceBase):
    """Actions on chosen jobs and pipelines."""

    @acts
    async def cancel(self, job_ids: Sequence[str]) -> list[str]:
        """Cancel jobs and everything downstream; return every id cancelled."""
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.cancel(conn, job_ids, self.actor)

    @acts
    async def retry(self, job_ids: Sequence[str], *, fresh: bool = False) -> list[str]:
        """Put failed or cancelled jobs back in the queue. A durable processor's completed steps
        are kept, so it goes on from where it failed; `fresh` forgets them (retry from scratch)."""
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.retry(conn, job_ids, self.actor, fresh=fresh)

    @acts
    async def retry_with_input(self, job_id: str, input_data: dict[str, Any], *, fresh: bool = False,
                               validate: Validator | None = None) -> list[str]:
        """Retry a failed or cancelled job with a new input (the old one kept in the audit log).
        `validate(type, input_data)` is the door's check against the processor's input model, when
        it has the processors loaded: it raises InvalidInput naming the wrong field, and then
        nothing changes."""
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, [job_id])
            if validate is not None:
                record = (await fetch_records(conn, [job_id])).get(job_id)
                if record is None:
                    raise JobNotFound(f"no job with id {job_id}")
                validate(record.type, input_data)
            return await transitions.retry_with_input(conn, job_id, input_data, self.actor, fresh=fresh)

    @acts
    async def approve(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.approve(conn, job_ids, self.actor)

    @acts
    async def reject(self, job_ids: Sequence[str], reason: str) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.reject(conn, job_ids, reason, self.actor)

    async def retry_plan(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        """What `retry_downstream` would touch (id, type, status), without changing anything."""
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return [dict(r) for r in await transitions.retry_plan(conn, job_ids)]

    @acts
    async def retry_downstream(self, job_ids: Sequence[str]) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_visible(conn, job_ids)
            return await transitions.retry_downstream(conn, job_ids, self.actor)

    @acts
    async def cancel_pipeline(self, pipeline_id: str) -> list[str]:
        async with self.pool.acquire() as conn:
            await self._check_pipeline_visible(conn, pipeline_id)
            return await transitions.cancel_pipeline(conn, pipeline_id, self.actor)

    @acts
    async def retry_pipeline(self, pipeline_id: str) -> list[str]:
        """Retry every failed or cancelled job of a pipeline and what follows them."""
        async with self.pool.acquire() as conn:
            await self._check_pipeline_visible(conn, pipeline_id)
            ids = await pipeline_queries.retryable_in(conn, pipeline_id)
            if not ids:
                return []
            return await transitions.retry_downstream(conn, ids, self.actor)
