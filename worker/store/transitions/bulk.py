"""Bulk actions on a filter: retry, cancel, approve or reject every job it matches, a chunk (one
transaction, one audit row) at a time.
"""

from __future__ import annotations

from dataclasses import replace

import asyncpg

from jobdesk.core.errors import InvalidJob
from jobdesk.core.rules import BULK_ACTIONS, LEGAL_FROM, Actor, BulkChunk
from jobdesk.store.jobs import JobFilter
from jobdesk.store.transitions.actions import approve, cancel, reject, retry

BULK_CHUNK = 1000  # jobs per transaction (and per audit row) of a bulk action


def bulk_filter(action: str, filt: JobFilter) -> JobFilter | None:
    """The filter narrowed to the statuses `action` is legal from; None if none is left."""
    if action not in BULK_ACTIONS:
        raise InvalidJob(f"bulk {action} is not possible; bulk actions are {', '.join(BULK_ACTIONS)}")
    legal = LEGAL_FROM[action] & filt.statuses if filt.statuses else LEGAL_FROM[action]
    return replace(filt, statuses=frozenset(legal)) if legal else None


async def bulk_chunk(conn: asyncpg.Connection, action: str, filt: JobFilter, actor: Actor, *,
                     after_seq: int = 0, upto_seq: int | None = None, limit: int = BULK_CHUNK,
                     reason: str | None = None) -> BulkChunk:
    """Apply `action` to the next `limit` jobs matching `filt` after `after_seq`, in one
    transaction with one audit row. A rejection needs its `reason` (the jobs' error).

    Jobs are taken in enqueue order (keyset on `seq`), so a run of chunks meets every job once
    however the table changes meanwhile, and only those the action is legal for; `upto_seq`
    leaves out jobs enqueued after the run began.
    """
    if action == "reject" and not (reason and reason.strip()):
        raise InvalidJob("a rejection needs a reason")
    if not 1 <= limit <= BULK_CHUNK:
        raise InvalidJob(f"a bulk chunk holds 1 to {BULK_CHUNK} jobs, not {limit}")
    narrowed = bulk_filter(action, filt)
    if narrowed is None:
        return BulkChunk([], [], None)
    params: list[object] = [after_seq]
    where = narrowed.where(params)
    if upto_seq is not None:
        params.append(upto_seq)
        where += f" AND seq <= ${len(params)}"
    params.append(limit)
    async with conn.transaction():
        # FOR UPDATE re-checks the filter on rows that changed meanwhile, so only legal ones come back.
        rows = await conn.fetch(f"SELECT id, seq FROM jobs WHERE seq > $1 AND {where} "
                                f"ORDER BY seq LIMIT ${len(params)} FOR UPDATE", *params)
        if not rows:
            return BulkChunk([], [], None)
        picked = [r["id"] for r in rows]
        note = f"bulk: {filt.describe()}"
        if action == "reject":
            changed = await reject(conn, picked, reason or "", actor, note=note)
        else:
            act = {"retry": retry, "cancel": cancel, "approve": approve}[action]
            changed = await act(conn, picked, actor, reason=note)
    return BulkChunk(picked, changed, rows[-1]["seq"] if len(rows) == limit else None)
