"""Bulk actions (retry, cancel, approve, reject) on every job matching a filter: counted, then run a
chunk (one transaction) at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from jobdesk.service.access import acts
from jobdesk.service.base import ServiceBase
from jobdesk.service.read_models import BULK_COUNT_CAP, BulkCount, BulkResult
from jobdesk.store import transitions
from jobdesk.store.jobs import JobFilter


class BulkActions(ServiceBase):
    """Retry, cancel, approve or reject every job matching a filter."""

    async def bulk_count(self, action: str, filt: JobFilter, *, cap: int = BULK_COUNT_CAP) -> BulkCount:
        """Dry run of a bulk `action` (retry, cancel, approve, reject): how many jobs matching `filt` it
        would act on (those it is legal for), counted up to `cap`."""
        narrowed = transitions.bulk_filter(action, self._scope(filt))
        if narrowed is None:
            return BulkCount(action, filt, 0, False, None)
        params: list[Any] = []
        where = narrowed.where(params)
        params.append(cap + 1)
        async with (await self._read_pool()).acquire() as conn:
            row = await conn.fetchrow(f"SELECT count(*) AS n, max(seq) AS last FROM "
                                      f"(SELECT seq FROM jobs WHERE {where} LIMIT ${len(params)}) AS capped", *params)
        n = int(row["n"])
        if n > cap:  # counting stopped: the run is not bounded by what was counted
            return BulkCount(action, filt, cap, True, None)
        return BulkCount(action, filt, n, False, row["last"])

    @acts
    async def bulk_apply(self, action: str, filt: JobFilter, *, after_seq: int = 0, upto_seq: int | None = None,
                         limit: int = transitions.BULK_CHUNK, reason: str | None = None) -> transitions.BulkChunk:
        """One chunk of a bulk action: apply it to the next `limit` (at most 1,000) jobs matching
        `filt` after `after_seq`, in one transaction and one audit row. Call again with the
        chunk's `next_seq` until it is None. A rejection needs its `reason`."""
        async with self.pool.acquire() as conn:
            return await transitions.bulk_chunk(conn, action, self._scope(filt), self.actor, after_seq=after_seq,
                                                upto_seq=upto_seq, limit=limit, reason=reason)

    async def bulk_run(self, action: str, filt: JobFilter, *, upto_seq: int | None = None,
                       limit: int = transitions.BULK_CHUNK, reason: str | None = None
                       ) -> AsyncIterator[transitions.BulkChunk]:
        """Every chunk of a bulk action, one after another (stop iterating to stop the run)."""
        after = 0
        while True:
            chunk = await self.bulk_apply(action, filt, after_seq=after, upto_seq=upto_seq, limit=limit,
                                          reason=reason)
            yield chunk
            if chunk.next_seq is None:
                return
            after = chunk.next_seq

    async def bulk(self, action: str, filt: JobFilter, *, dry_run: bool = False,
                   reason: str | None = None) -> BulkResult:
        """A whole bulk action (or its dry run), for front doors without a progress bar. The count
        that bounds a real run is read on the primary, so that it includes every job written. A
        rejection needs its `reason`."""
        count = await (self if dry_run else self.on_primary()).bulk_count(action, filt)
        if dry_run:
            return BulkResult(action, filt, count.count, count.capped, dry_run=True)
        result = BulkResult(action, filt, 0, False, dry_run=False)
        async for chunk in self.bulk_run(action, filt, upto_seq=count.upto_seq, reason=reason):
            result.count += len(chunk.picked)
            result.changed += len(chunk.changed)
            result.chunks += 1 if chunk.picked else 0
        return result
