"""Completing a job whose claim was lost: the worker ran it and holds its result, but the
database has it `queued` again with the attempts it had before that claim. A claim commits
asynchronously (`claim.py`), so a failover to a standby, or a crash, may undo it while the
worker goes on running the job. Its result is written then, instead of the job running again."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.validation import json_text

# Only a job still queued exactly as before the lost claim (its attempts one fewer than the
# worker's), still active, and claimed by nobody since: any other state means someone else
# holds it, or it was acted on, and the result is not written.
_COMPLETE_LOST_CLAIM = """
UPDATE jobs AS j
   SET status = 'completed', result_data = u.result::jsonb, attempts = u.attempt, completed_at = now(),
       updated_at = now(), error_message = NULL, error_fingerprint = NULL, next_retry_at = NULL, run_at = NULL,
       worker_id = NULL
  FROM unnest($1::text[], $2::text[], $3::int[]) AS u(id, result, attempt)
 WHERE j.id = u.id AND j.status = 'queued' AND j.is_active AND j.attempts = u.attempt - 1
   AND j.worker_id IS NULL
RETURNING j.id
"""


async def complete_lost_claims(conn: asyncpg.Connection, finished: Sequence[tuple[Job, ProcessorResult]]
                               ) -> set[str]:
    """Write the plain results (no next jobs, no approval) of jobs whose claim was lost;
    return the ids completed."""
    plain = [(job, result) for job, result in finished if not result.next_jobs and not result.requires_approval]
    if not plain:
        return set()
    rows = await conn.fetch(_COMPLETE_LOST_CLAIM, [j.id for j, _ in plain],
                            [json_text(r.result_data) for _, r in plain], [j.attempt for j, _ in plain])
    return {r["id"] for r in rows}
