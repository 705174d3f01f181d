"""Statistics and health: throughput, queue depth, what needs attention, failures grouped by
fingerprint, and the HTTP API's own checks."""

from __future__ import annotations

from datetime import datetime

from jobdesk.service.job_reads import JobReads
from jobdesk.store import failures as failure_queries
from jobdesk.store import jobs as job_queries
from jobdesk.store import stats as stats_queries
from jobdesk.store.failures import FailureGroup, FailureSample
from jobdesk.store.stats import Attention, Metrics, Transition, Window
from jobdesk.store.table_size import TableSize, fetch_table_size


class StatsReads(JobReads):
    """Statistics, failures and health."""

    async def metrics(self, window: Window, job_type: str | None = None) -> Metrics:
        """Throughput, queue depth and wait/run percentiles per type over `window` (all users);
        with `job_type`, the throughput and percentiles of that type alone."""
        async with (await self._read_pool()).acquire() as conn:
            return await stats_queries.fetch_metrics(conn, window, job_type)

    async def table_size(self) -> TableSize:
        """The jobs table's estimated row count and its size on disk, indexes included."""
        async with (await self._read_pool()).acquire() as conn:
            return await fetch_table_size(conn)

    async def attention(self) -> Attention:
        """Jobs failed for good in the last hour and jobs waiting for approval, and the database's clock."""
        async with (await self._read_pool()).acquire() as conn:
            return await stats_queries.fetch_attention(conn)

    async def transitions_since(self, since: datetime, *, limit: int = 500) -> list[Transition]:
        """Jobs that failed for good or started waiting for approval after `since`."""
        async with (await self._read_pool()).acquire() as conn:
            found = await stats_queries.fetch_transitions(conn, since, limit=limit)
        if self.user_id is None:
            return found
        mine = {r.id for r in await self.job_rows([t.id for t in found])}
        return [t for t in found if t.id in mine]

    async def ping(self) -> None:
        """Raise if the database does not answer."""
        await self.pool.fetchval("SELECT 1")

    async def active_counts(self, cap: int = job_queries.COUNT_CAP) -> dict[tuple[str, str], int]:
        """Queued, running and failed jobs per (type, status), each status counted up to `cap`."""
        async with (await self._read_pool()).acquire() as conn:
            return await job_queries.type_status_counts(conn, ["queued", "in_progress", "failed"], cap)

    async def failures_mark(self) -> tuple[object, ...]:
        """A mark that changes when the failure groups may have changed (`failure_groups`)."""
        async with (await self._read_pool()).acquire() as conn:
            return await failure_queries.failures_mark(conn)

    async def failure_groups(self, *, hours: int = failure_queries.WINDOW_HOURS) -> list[FailureGroup]:
        """Failed jobs, and failed attempts of the last `hours`, grouped by error fingerprint."""
        async with (await self._read_pool()).acquire() as conn:
            return await failure_queries.failure_groups(conn, hours=hours, user_id=self.user_id)

    async def failure_sample(self, fingerprint: str, *,
                             hours: int = failure_queries.WINDOW_HOURS) -> FailureSample | None:
        """The newest failure of a group, with its traceback."""
        async with (await self._read_pool()).acquire() as conn:
            return await failure_queries.failure_sample(conn, fingerprint, hours=hours, user_id=self.user_id)
