"""Reading what jobs reported while they ran: their log lines (all, or followed as they come)
and their progress. Follow polls, so it works through a pooler in transaction mode as well as
on a direct connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

from jobdesk.core.errors import JobNotFound
from jobdesk.core.job_report import LOGS_FINISHED, JobLogLine, JobProgress
from jobdesk.core.models import Status
from jobdesk.service.base import ServiceBase
from jobdesk.store import job_reports

FOLLOW_POLL_S = 0.5
FOLLOW_BATCH = 10_000  # lines per read while following


class JobLogReads(ServiceBase):
    """A job's log lines and jobs' progress, for the CLI, the HTTP API and the console."""

    async def job_logs(self, job_id: str, *, after: tuple[int, int] = (0, 0),
                       limit: int | None = None) -> list[JobLogLine]:
        """The job's log lines in order (attempt, then as emitted), after the position `after`
        (attempt, seq), at most `limit` (None: all). JobNotFound for a job that does not exist
        or is not the caller's."""
        lines, _ = await self._lines_and_status(job_id, after, limit)
        return lines

    async def _lines_and_status(self, job_id: str, after: tuple[int, int],
                                limit: int | None) -> tuple[list[JobLogLine], Status]:
        async with self.pool.acquire() as conn:  # the primary: a follower wants the lines just written
            owner = await conn.fetchrow("SELECT user_id, status FROM jobs WHERE id = $1", job_id)
            if owner is None or not self._owns(owner["user_id"]):
                raise JobNotFound(f"no job with id {job_id}")
            # The status is read first: when it says finished, the lines read after it are all there are.
            return await job_reports.fetch_logs(conn, job_id, after=after, limit=limit), Status(owner["status"])

    async def follow_logs(self, job_id: str, *, after: tuple[int, int] = (0, 0),
                          poll: float = FOLLOW_POLL_S) -> AsyncGenerator[list[JobLogLine], None]:
        """The job's log lines, a batch at a time as they are written, until the job has
        finished (completed, failed, cancelled or waiting for approval) and every line is read.
        The first batch is what is stored now after the position `after` (maybe empty);
        JobNotFound before it if the job does not exist."""
        while True:
            lines, status = await self._lines_and_status(job_id, after, FOLLOW_BATCH)
            if lines:
                after = (lines[-1].attempt, lines[-1].seq)
            yield lines
            if status in LOGS_FINISHED and len(lines) < FOLLOW_BATCH:
                return
            if len(lines) < FOLLOW_BATCH:  # else more are there now
                await asyncio.sleep(poll)

    async def job_progress(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        """The last progress of each of these jobs that reported any, by id."""
        async with (await self._read_pool()).acquire() as conn:
            found = await job_reports.fetch_progress(conn, job_ids)
            if self.user_id is not None and found:
                rows = await conn.fetch("SELECT id FROM jobs WHERE id = ANY($1::text[]) AND user_id = $2",
                                        list(found), self.user_id)
                mine = {r["id"] for r in rows}
                found = {k: v for k, v in found.items() if k in mine}
        return found
