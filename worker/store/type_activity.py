"""Each job type at a glance (`jobdesk types`, GET /api/types, the console's types view): its jobs
running and queued now, and its last 5 minutes from the 5-second rollup the workers keep
(`job_stats_5s`, sql/035; written by `rollup.write`).

Every read is bounded whatever the size of `jobs`: the running jobs are read from the index that
holds them alone (their number is bounded by the workers' slots), the queued ones are counted
from the index of ready jobs up to a cap per type, and the history is at most 60 rows per type.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from jobdesk.core.type_controls import GLANCE_BUCKET_S, GLANCE_BUCKETS, TypeActivity
from jobdesk.store.jobs import COUNT_CAP

# The jobs a worker may claim now: queued, not waiting for a time or for other jobs (jobs_ready_idx).
_READY = "status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL"

_RUNNING = """
SELECT type, count(*) AS n FROM jobs
 WHERE status = 'in_progress' AND type = ANY($1::text[])
 GROUP BY type"""

# In the index's order, so that the plan walks the index of the type's ready jobs, never the table.
_QUEUED = f"""
SELECT t.type, (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE type = t.type AND {_READY}
                                      ORDER BY priority DESC, seq LIMIT $2) AS c) AS n
  FROM unnest($1::text[]) AS t(type)"""

# The first of the 60 buckets: the current bucket is the last one.
_HISTORY = f"""
WITH since AS (SELECT to_timestamp(floor(extract(epoch FROM now()) / {GLANCE_BUCKET_S}) * {GLANCE_BUCKET_S}
                                   - {(GLANCE_BUCKETS - 1) * GLANCE_BUCKET_S}) AS at)
SELECT r.type, ((extract(epoch FROM r.bucket) - extract(epoch FROM s.at)) / {GLANCE_BUCKET_S})::int AS i,
       r.finished, r.failed
  FROM job_stats_5s r, since s
 WHERE r.bucket >= s.at AND r.type = ANY($1::text[])"""


async def type_activity(conn: asyncpg.Connection, types: Sequence[str], *,
                        cap: int = COUNT_CAP) -> dict[str, TypeActivity]:
    """These types at a glance, by name (read in one snapshot)."""
    names = list(types)
    if not names:
        return {}
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        running = {r["type"]: r["n"] for r in await conn.fetch(_RUNNING, names)}
        queued = {r["type"]: r["n"] for r in await conn.fetch(_QUEUED, names, cap + 1)}
        history = await conn.fetch(_HISTORY, names)
    finished = {t: [0] * GLANCE_BUCKETS for t in names}
    failed = {t: [0] * GLANCE_BUCKETS for t in names}
    for r in history:
        if 0 <= r["i"] < GLANCE_BUCKETS:
            finished[r["type"]][r["i"]] += r["finished"]
            failed[r["type"]][r["i"]] += r["failed"]
    return {t: TypeActivity(running.get(t, 0), min(queued.get(t, 0), cap), queued.get(t, 0) > cap,
                            tuple(finished[t]), tuple(failed[t])) for t in names}
