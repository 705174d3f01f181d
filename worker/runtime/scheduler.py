"""Schedules in the database, and the firing of their ticks, without a leader.

Every worker runs `fire_due` in a loop. Each due schedule is locked with SKIP LOCKED, so one
worker handles it at a time; each tick that gets a job inserts its `schedule_ticks` row and the
job in one transaction, and the row's primary key (schedule, tick) refuses a second job for the
same tick even if two workers computed it. A tick handled is never handled again: the schedule's
`next_tick_at` moves past it in the same transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from jobdesk.core.errors import JobNotFound
from jobdesk.core.models import JobCreate
from jobdesk.core.schedules import Schedule, ScheduleRun, due_ticks
from jobdesk.store import transitions
from jobdesk.store.db import EXPECTED_DB_ERRORS
from jobdesk.store.rollup import DbCall

log = logging.getLogger("jobdesk.worker")

MAX_SLEEP_S = 1.0  # a worker looks for new or changed schedules at least this often
UNFINISHED = ("queued", "in_progress", "waiting_approval")

_COLUMNS = ("name, cron, every_s, timezone, type, input_data, priority, misfire, overlap, paused, "
            "next_tick_at, last_tick_at, last_job_id, source, created_at, updated_at")


@dataclass
class ScheduleRecord:
    """A row of `schedules`."""

    schedule: Schedule
    paused: bool
    next_tick_at: datetime
    last_tick_at: datetime | None
    last_job_id: str | None
    source: str
    created_at: datetime
    updated_at: datetime
    recent: list[ScheduleRun] = field(default_factory=list)  # its newest runs, oldest first (when read)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ScheduleRecord:
        spec = Schedule(name=row["name"], type=row["type"], input_data=row["input_data"], cron=row["cron"],
                        every_s=row["every_s"], timezone=row["timezone"], misfire=row["misfire"],
                        overlap=row["overlap"], priority=row["priority"])
        return cls(spec, row["paused"], row["next_tick_at"], row["last_tick_at"], row["last_job_id"],
                   row["source"], row["created_at"], row["updated_at"])

    def to_json(self) -> dict[str, Any]:
        s = self.schedule
        return {"name": s.name, "cron": s.cron, "every_s": s.every_s, "expression": s.expression,
                "description": s.description, "timezone": s.timezone, "type": s.type,
                "input_data": s.input_data, "priority": s.priority,
                "misfire": s.misfire, "overlap": s.overlap, "paused": self.paused,
                "next_run_at": None if self.paused else self.next_tick_at.isoformat(),
                "last_run_at": self.last_tick_at.isoformat() if self.last_tick_at else None,
                "last_job_id": self.last_job_id, "source": self.source,
                "recent": [run.to_json() for run in self.recent]}


@dataclass
class ScheduledJob:
    """A tick of a schedule and the job it made (None: skipped, the previous one was unfinished)."""

    tick_at: datetime
    job_id: str | None
    status: str | None


# -- managing schedules ---------------------------------------------------------------------

async def add(conn: asyncpg.Connection, schedule: Schedule, *, source: str = "cli",
              replace: bool = False) -> ScheduleRecord:
    """Create a schedule (or, with `replace`, update one of that name: its pause state and
    position stay unless its timing changed)."""
    schedule.check()
    first = schedule.next_tick(datetime.now(UTC))
    on_conflict = """ON CONFLICT (name) DO UPDATE SET
            cron = EXCLUDED.cron, every_s = EXCLUDED.every_s, timezone = EXCLUDED.timezone, type = EXCLUDED.type,
            input_data = EXCLUDED.input_data, priority = EXCLUDED.priority, misfire = EXCLUDED.misfire,
            overlap = EXCLUDED.overlap, source = EXCLUDED.source, updated_at = now(),
            next_tick_at = CASE WHEN (schedules.cron, schedules.every_s, schedules.timezone)
                                     IS NOT DISTINCT FROM (EXCLUDED.cron, EXCLUDED.every_s, EXCLUDED.timezone)
                                THEN schedules.next_tick_at ELSE EXCLUDED.next_tick_at END""" if replace else ""
    try:
        row = await conn.fetchrow(f"""
            INSERT INTO schedules (name, cron, every_s, timezone, type, input_data, priority, misfire, overlap,
                                   next_tick_at, source)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
            {on_conflict}
            RETURNING {_COLUMNS}""", schedule.name, schedule.cron, schedule.every_s, schedule.timezone,
            schedule.type, schedule.input_data, schedule.priority, schedule.misfire, schedule.overlap, first, source)
    except asyncpg.UniqueViolationError:
        from jobdesk.core.errors import InvalidJob

        raise InvalidJob(f"a schedule named {schedule.name} already exists; remove it first") from None
    return ScheduleRecord.from_row(row)


async def upsert_declared(conn: asyncpg.Connection, schedules: Sequence[Schedule], source: str) -> None:
    """The SCHEDULES a processor module declares, as a worker starting with it sees them."""
    for schedule in schedules:
        await add(conn, schedule, source=source, replace=True)


async def list_schedules(conn: asyncpg.Connection) -> list[ScheduleRecord]:
    rows = await conn.fetch(f"SELECT {_COLUMNS} FROM schedules ORDER BY name")
    return [ScheduleRecord.from_row(r) for r in rows]


async def get(conn: asyncpg.Connection, name: str) -> ScheduleRecord:
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM schedules WHERE name = $1", name)
    if row is None:
        raise JobNotFound(f"no schedule named {name}")
    return ScheduleRecord.from_row(row)


async def set_paused(conn: asyncpg.Connection, name: str, paused: bool) -> ScheduleRecord:
    """Pause or resume. Ticks that pass while paused are not missed ticks: a resumed schedule
    goes on from its next tick."""
    async with conn.transaction():
        record = await get(conn, name)
        following = record.schedule.next_tick(datetime.now(UTC))
        row = await conn.fetchrow(f"""
            UPDATE schedules SET paused = $2, updated_at = now(),
                   next_tick_at = CASE WHEN paused AND NOT $2 THEN $3 ELSE next_tick_at END
             WHERE name = $1 RETURNING {_COLUMNS}""", name, paused, following)
    return ScheduleRecord.from_row(row)


async def remove(conn: asyncpg.Connection, name: str) -> None:
    if await conn.fetchval("DELETE FROM schedules WHERE name = $1 RETURNING name", name) is None:
        raise JobNotFound(f"no schedule named {name}")


async def jobs_of(conn: asyncpg.Connection, name: str, *, limit: int = 50) -> list[ScheduledJob]:
    """The newest ticks of a schedule with the jobs they made."""
    await get(conn, name)
    rows = await conn.fetch("""
        SELECT t.tick_at, t.job_id, j.status FROM schedule_ticks t LEFT JOIN jobs j ON j.id = t.job_id
         WHERE t.schedule = $1 ORDER BY t.tick_at DESC LIMIT $2""", name, limit)
    return [ScheduledJob(r["tick_at"], r["job_id"], r["status"]) for r in rows]


# -- firing ---------------------------------------------------------------------------------

async def fire_due(conn: asyncpg.Connection, *, now: datetime | None = None) -> list[str]:
    """Give every due schedule's ticks their jobs; return the ids of the jobs created."""
    created: list[str] = []
    async with conn.transaction():
        rows = await conn.fetch(f"""
            SELECT {_COLUMNS} FROM schedules WHERE NOT paused AND next_tick_at <= now()
             ORDER BY next_tick_at LIMIT 100 FOR UPDATE SKIP LOCKED""")
        if not rows:
            return created
        at = now or await conn.fetchval("SELECT now()")
        for row in rows:
            record = ScheduleRecord.from_row(row)
            created += await _fire(conn, record, at)
    return created


async def _fire(conn: asyncpg.Connection, record: ScheduleRecord, now: datetime) -> list[str]:
    spec = record.schedule
    ticks, following = due_ticks(spec, record.next_tick_at, now)
    created: list[str] = []
    last_job = record.last_job_id
    for tick in ticks:
        if spec.overlap == "skip" and last_job is not None and await conn.fetchval(
                "SELECT status = ANY($2::text[]) FROM jobs WHERE id = $1", last_job, list(UNFINISHED)):
            await conn.execute("INSERT INTO schedule_ticks (schedule, tick_at) VALUES ($1, $2) "
                               "ON CONFLICT DO NOTHING", spec.name, tick)
            continue
        job = JobCreate(spec.type, dict(spec.input_data), priority=spec.priority)
        claimed = await conn.fetchval("INSERT INTO schedule_ticks (schedule, tick_at, job_id) VALUES ($1, $2, $3) "
                                      "ON CONFLICT DO NOTHING RETURNING tick_at", spec.name, tick, job.id)
        if claimed is None:
            continue  # another worker gave this tick its job already
        await transitions.enqueue(conn, [job])
        created.append(job.id)
        last_job = job.id
    await conn.execute("""
        UPDATE schedules SET next_tick_at = $2, last_tick_at = COALESCE($3, last_tick_at),
                             last_job_id = $4, updated_at = now()
         WHERE name = $1""", spec.name, following, ticks[-1] if ticks else None, last_job)
    skipped = len(ticks) - len(created)
    if created or skipped:
        log.info("schedule %s: %d job(s) created%s", spec.name, len(created),
                 f", {skipped} tick(s) skipped (previous job unfinished)" if skipped else "")
    return created


async def next_due_in(conn: asyncpg.Connection) -> float | None:
    """Seconds until the earliest unpaused schedule is due (0 if one is), or None without any."""
    value = await conn.fetchval("SELECT extract(epoch FROM min(next_tick_at) - now())::float8 FROM schedules "
                                "WHERE NOT paused")
    return None if value is None else max(0.0, float(value))


async def run_loop(db_call: DbCall, stopping: asyncio.Event, *,
                   on_created: Callable[[list[str]], None] | None = None) -> None:
    """A worker's scheduler: sleep until the next schedule is due (at most MAX_SLEEP_S), fire.

    `db_call(fn)` runs `fn(conn)` on one of the worker's connections; failures (the database is
    away) are the caller's to log, and the loop carries on.
    """
    while not stopping.is_set():
        wait = MAX_SLEEP_S
        try:
            created = await db_call(fire_due)
            if created and on_created is not None:
                on_created(created)
            due_in = await db_call(next_due_in)
            if due_in is not None:
                wait = min(wait, due_in)
        except asyncio.CancelledError:
            raise
        except EXPECTED_DB_ERRORS as exc:  # the database is away: the worker's own loops say so
            log.debug("scheduler: %s", exc)
        except Exception:
            log.exception("scheduler: firing schedules failed; trying again in %.0f s", MAX_SLEEP_S)
        try:
            async with asyncio.timeout(max(wait, 0.01)):
                await stopping.wait()
        except TimeoutError:
            pass
