"""Reading pipelines: the list, the graph and the step indicator."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import asyncpg

from jobdesk.core.dag import dependency_order
from jobdesk.core.errors import JobNotFound
from jobdesk.service.base import ServiceBase
from jobdesk.service.read_models import PipelineSteps
from jobdesk.store import pipelines as pipeline_queries
from jobdesk.store.pipelines import GraphNode, PipelineFilter, PipelineRow


class PipelineReads(ServiceBase):
    """Reading pipelines."""

    async def pipelines(self, filt: PipelineFilter, *, after_seq: int | None = None,
                        limit: int = 200) -> tuple[list[PipelineRow], bool]:
        """One page of the pipeline list, newest first, and whether more follow."""
        async with (await self._read_pool()).acquire() as conn:
            return await pipeline_queries.fetch_pipelines(conn, filt, after_seq=after_seq, limit=limit)

    async def pipeline_changes(self, job_ids: Collection[str],
                               filt: PipelineFilter) -> tuple[set[str], list[PipelineRow]]:
        """The pipelines these jobs belong to, and the list rows of those that match `filt`."""
        async with (await self._read_pool()).acquire() as conn:
            pipeline_ids = await pipeline_queries.pipelines_of(conn, sorted(job_ids))
            if not pipeline_ids:
                return pipeline_ids, []
            return pipeline_ids, await pipeline_queries.fetch_pipeline_rows(conn, sorted(pipeline_ids), filt)

    async def pipeline_rows(self, pipeline_ids: Sequence[str],
                            filt: PipelineFilter = PipelineFilter()) -> list[PipelineRow]:  # noqa: B008
        async with (await self._read_pool()).acquire() as conn:
            return await pipeline_queries.fetch_pipeline_rows(conn, pipeline_ids, filt)

    async def pipeline_graph(self, pipeline_id: str, *,
                             limit: int = pipeline_queries.GRAPH_LIMIT) -> tuple[list[GraphNode], bool]:
        """The pipeline's jobs in enqueue order (at most `limit`), and whether there are more."""
        async with (await self._read_pool()).acquire() as conn:
            return await pipeline_queries.fetch_graph(conn, pipeline_id, limit=limit)

    async def pipeline_steps(self, pipeline_id: str) -> PipelineSteps:
        """The step indicator of a pipeline: derived status, progress, jobs in dependency order.
        A pipeline not found on the read replica is looked for on the primary (it may be new)."""
        return await self._read_found(lambda pool: self._steps(pool, pipeline_id))

    async def _steps(self, pool: asyncpg.Pool, pipeline_id: str) -> PipelineSteps:
        async with pool.acquire() as conn:
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
        async with (await self._read_pool()).acquire() as conn:
            return await pipeline_queries.retryable_in(conn, pipeline_id)
