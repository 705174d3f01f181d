"""Why a queued job has not started yet, in one sentence (and the ids it is waiting for).

Checked in the order a job would meet them: unfinished dependencies, a durable processor's
suspension (a sleep, a wait for an event or for child jobs), a time to wait for (its scheduled
time or its retry), then whether its type is paused across the fleet (`jobdesk types pause`),
whether any live worker would claim it (none serves its type, or every one that does is
paused), a global limit that is full, flow control (a rate, a limit per user, fair share:
`jobdesk.store.flow_limits`), and else it is ready.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg

from jobdesk.core.timefmt import until
from jobdesk.core.type_controls import paused_text
from jobdesk.store.durable import WaitRow, wait_of
from jobdesk.store.fleet import LIVE_STATES
from jobdesk.store.flow_limits import flow_reason
from jobdesk.store.type_controls import paused_type

AHEAD_CAP = 1000  # ready jobs ahead in line counted at most


@dataclass(frozen=True)
class WaitingReason:
    # dependencies, sleeping, event, children, scheduled, retrying, type_paused, type_limit, no_worker, paused,
    # ready; flow control: rate_limit, user_rate_limit, user_limit, fair_share
    kind: str
    text: str
    dependencies: list[str] = field(default_factory=list)  # unfinished ones, in enqueue order
    at: datetime | None = None  # for scheduled and retrying, and a suspension's wake time or timeout


def _at(when: datetime) -> str:
    return f"{when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC ({until(when)})"


def _clock(when: datetime) -> str:
    return f"{when.astimezone(UTC):%H:%M:%S} UTC"


def suspended_reason(wait: WaitRow) -> WaitingReason:
    """Why a suspended job waits: "sleeping until 12:05:00 UTC (in 3 min)", "waiting for event
    upload-done:42 (timeout 13:00:00 UTC)", "waiting for 3 of 5 child jobs"."""
    timeout = f" (timeout {_clock(wait.until)})" if wait.until is not None else ""
    if wait.kind == "event":
        return WaitingReason("event", f"waiting for event {wait.event_key}{timeout}", at=wait.until)
    if wait.kind == "jobs":
        return WaitingReason("children", f"waiting for {wait.children_pending} of {len(wait.child_ids)} child jobs"
                             f"{timeout}", at=wait.until)
    when = wait.until
    text = f"sleeping until {_clock(when)} ({until(when)})" if when is not None else "sleeping"
    return WaitingReason("sleeping", text, at=when)


async def waiting_reason(conn: asyncpg.Connection, job_id: str, lease_timeout_s: float) -> WaitingReason | None:
    """Why this job is queued and not running; None if it is not queued (or not found)."""
    job = await conn.fetchrow("""
        SELECT type, status, is_active, pending_deps, run_at, scheduled_at, next_retry_at, retry_count,
               priority, seq, user_id, now() AS now
          FROM jobs WHERE id = $1""", job_id)
    if job is None or job["status"] != "queued" or not job["is_active"]:
        return None
    if job["pending_deps"] > 0:
        deps = [r["id"] for r in await conn.fetch("""
            SELECT p.id FROM job_dependencies d JOIN jobs p ON p.id = d.depends_on_id
             WHERE d.job_id = $1 AND p.status <> 'completed' ORDER BY p.seq""", job_id)]
        noun = "dependency" if len(deps) == 1 else "dependencies"
        return WaitingReason("dependencies", f"waiting for {len(deps)} {noun}: {', '.join(deps)}", deps)
    now: datetime = job["now"]
    if job["run_at"] is not None:
        wait = await wait_of(conn, job_id)
        if wait is not None:
            return suspended_reason(wait)
    if job["run_at"] is not None and job["run_at"] > now:
        retry_at, scheduled_at = job["next_retry_at"], job["scheduled_at"]
        if job["retry_count"] > 0 and retry_at is not None and retry_at > now:
            return WaitingReason("retrying", f"retrying at {_at(retry_at)} (retry {job['retry_count']})",
                                 at=retry_at)
        at = scheduled_at if scheduled_at is not None and scheduled_at > now else job["run_at"]
        return WaitingReason("scheduled", f"scheduled for {_at(at)}", at=at)
    job_type = job["type"]
    pause = await paused_type(conn, job_type)
    if pause is not None:
        return WaitingReason("type_paused", paused_text(pause["paused_by"], pause["paused_at"]), at=pause["paused_at"])
    states = [r["state"] for r in await conn.fetch("""
        SELECT state FROM workers
         WHERE $1 = ANY(job_types) AND state = ANY($2::text[])
           AND heartbeat_at >= now() - make_interval(secs => $3)""", job_type, list(LIVE_STATES), lease_timeout_s)]
    if not states:
        return WaitingReason("no_worker", f"no live worker serves {job_type}")
    if "running" not in states:
        if len(states) == 1:
            return WaitingReason("paused", f"the worker is {states[0]} (the one live worker that serves {job_type})")
        which = "paused" if set(states) == {"paused"} else "paused or draining"
        return WaitingReason("paused", f"every worker that serves {job_type} is {which} ({len(states)})")
    limit = await conn.fetchrow("""
        SELECT l.max_running, (SELECT count(*) FROM jobs WHERE status = 'in_progress' AND type = l.type) AS running
          FROM type_limits l WHERE l.type = $1""", job_type)
    if limit is not None and limit["running"] >= limit["max_running"]:
        return WaitingReason("type_limit", f"type limit reached ({limit['running']} of {limit['max_running']} running)")
    flow = await flow_reason(conn, job_type, job["user_id"], job["priority"])
    if flow is not None:
        return WaitingReason(*flow)
    ahead = await conn.fetchval("""
        SELECT count(*) FROM (SELECT 1 FROM jobs
         WHERE type = $1 AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
           AND (priority > $2 OR (priority = $2 AND seq < $3)) LIMIT $4) a""",
        job_type, job["priority"], job["seq"], AHEAD_CAP)
    if ahead == 0:
        return WaitingReason("ready", "ready, next in line")
    more = "+" if ahead >= AHEAD_CAP else ""
    return WaitingReason("ready", f"ready, {ahead}{more} ahead in line")
