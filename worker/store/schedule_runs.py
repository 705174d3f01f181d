"""A schedule's runs: the newest jobs its ticks made, with their status and time (`jobdesk schedule
list`, the Schedules tab), and a run asked for now (`jobdesk schedule run`).

A run asked for now is a `schedule_ticks` row marked `manual` (sql/036), written in the same
transaction as its job and its audit row. It leaves the schedule's `next_tick_at`,
`last_tick_at` and `last_job_id` alone: the next regular tick comes when it would have.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from jobdesk.core.errors import JobNotFound
from jobdesk.core.models import JobCreate
from jobdesk.core.rules import Actor
from jobdesk.core.schedules import ScheduleRun
from jobdesk.store import transitions

RECENT_RUNS = 20  # runs per schedule in `recent`

# Per schedule, its newest runs from the primary key (schedule, tick_at, manual), read backwards.
_RECENT = """
SELECT s.name, r.tick_at, r.job_id, r.manual, j.status, j.started_at,
       CASE WHEN j.status IN ('completed', 'failed', 'cancelled') AND j.started_at IS NOT NULL
            THEN greatest(0, extract(epoch FROM coalesce(j.completed_at, j.updated_at) - j.started_at))::float8
       END AS duration_s
  FROM unnest($1::text[]) AS s(name)
 CROSS JOIN LATERAL (SELECT t.tick_at, t.job_id, t.manual FROM schedule_ticks t
                      WHERE t.schedule = s.name AND t.job_id IS NOT NULL
                      ORDER BY t.tick_at DESC LIMIT $2) AS r
  LEFT JOIN jobs j ON j.id = r.job_id
 ORDER BY s.name, r.tick_at"""


async def recent_runs(conn: asyncpg.Connection, names: Sequence[str],
                      limit: int = RECENT_RUNS) -> dict[str, list[ScheduleRun]]:
    """The newest `limit` runs of each schedule, oldest first; skipped ticks (no job) left out."""
    out: dict[str, list[ScheduleRun]] = {name: [] for name in names}
    for r in await conn.fetch(_RECENT, list(names), limit):
        out[r["name"]].append(ScheduleRun(r["job_id"], r["status"], r["tick_at"], r["started_at"],
                                          r["duration_s"], r["manual"]))
    return out


async def run_now(conn: asyncpg.Connection, name: str, actor: Actor) -> str:
    """Enqueue one run of a schedule now, paused or not; audited as `run-schedule`. Returns the job id."""
    async with conn.transaction():
        row = await conn.fetchrow("SELECT type, input_data, priority FROM schedules WHERE name = $1 FOR SHARE", name)
        if row is None:
            raise JobNotFound(f"no schedule named {name}")
        job = JobCreate(row["type"], dict(row["input_data"]), priority=row["priority"])
        await conn.execute("INSERT INTO schedule_ticks (schedule, tick_at, job_id, manual) "
                           "VALUES ($1, clock_timestamp(), $2, true)", name, job.id)
        [job_id] = await transitions.enqueue(conn, [job])
        await transitions.audit(conn, actor, "run-schedule", name, [job_id])
    return job_id
