"""Cancelling downstream: the queued and waiting jobs that depend, directly or not, on jobs that
were cancelled (by an operator, by their worker, or as a lost worker's).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from jobdesk.core.fingerprint import fingerprint

_UPSTREAM_CANCELLED = "cancelled: an upstream job was cancelled"
_DOWNSTREAM = """
WITH RECURSIVE down(id) AS (
    SELECT job_id FROM job_dependencies WHERE depends_on_id = ANY($1::text[])
    UNION
    SELECT e.job_id FROM job_dependencies e JOIN down ON e.depends_on_id = down.id
)
UPDATE jobs SET status = 'cancelled', is_active = false, updated_at = now(),
                error_message = $2, error_fingerprint = $3
 WHERE id IN (SELECT id FROM down) AND status IN ('queued', 'waiting_approval')
RETURNING id
"""


async def cancel_downstream(conn: asyncpg.Connection, job_ids: Sequence[str]) -> list[str]:
    """Cancel the queued and waiting jobs downstream of these; return their ids."""
    return [r["id"] for r in await conn.fetch(_DOWNSTREAM, list(job_ids), _UPSTREAM_CANCELLED,
                                              fingerprint(_UPSTREAM_CANCELLED))]
