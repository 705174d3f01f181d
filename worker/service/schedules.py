"""Schedules: periodic jobs, added, listed, paused, resumed and removed."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from jobdesk.core.schedules import Schedule
from jobdesk.runtime import scheduler
from jobdesk.runtime.scheduler import ScheduledJob, ScheduleRecord
from jobdesk.service.access import acts
from jobdesk.service.base import ServiceBase
from jobdesk.store import schedule_runs, transitions


async def upsert_declared(conn: asyncpg.Connection, declared: Sequence[tuple[Schedule, str]]) -> None:
    """Upsert the SCHEDULES processor modules declare, in one transaction (a worker does this as it starts)."""
    async with conn.transaction():
        for schedule, origin in declared:
            await scheduler.add(conn, schedule, source=origin, replace=True)


async def _with_recent(conn: asyncpg.Connection, records: list[ScheduleRecord]) -> list[ScheduleRecord]:
    """The records, each with its newest runs (`recent`, oldest first)."""
    recent = await schedule_runs.recent_runs(conn, [r.schedule.name for r in records])
    for record in records:
        record.recent = recent[record.schedule.name]
    return records


class ScheduleControl(ServiceBase):
    """Schedules."""

    async def schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by name, each with its newest runs (`recent`, oldest first)."""
        async with (await self._read_pool()).acquire() as conn:
            return await _with_recent(conn, await scheduler.list_schedules(conn))

    @acts
    async def run_schedule(self, name: str) -> str:
        """Enqueue one run of a schedule now (paused or not); its next regular run does not
        move. Audited. Returns the job's id; JobNotFound for an unknown name."""
        async with self.pool.acquire() as conn:
            return await schedule_runs.run_now(conn, name, self.actor)

    async def schedule_jobs(self, name: str, *, limit: int = 50) -> list[ScheduledJob]:
        """The newest ticks of a schedule and the jobs they made."""
        async with (await self._read_pool()).acquire() as conn:
            return await scheduler.jobs_of(conn, name, limit=limit)

    @acts
    async def add_schedule(self, schedule: Schedule) -> ScheduleRecord:
        async with self.pool.acquire() as conn, conn.transaction():
            record = await scheduler.add(conn, schedule, source=self.actor.source)
            await transitions.audit(conn, self.actor, "add-schedule", schedule.name)
        return record

    @acts
    async def declare_schedules(self, declared: Sequence[tuple[Schedule, str]]) -> None:
        """Upsert the SCHEDULES processor modules declare (a worker does this as it starts)."""
        async with self.pool.acquire() as conn:
            await upsert_declared(conn, declared)

    @acts
    async def pause_schedule(self, name: str) -> ScheduleRecord:
        return await self._set_paused(name, True)

    @acts
    async def resume_schedule(self, name: str) -> ScheduleRecord:
        return await self._set_paused(name, False)

    async def _set_paused(self, name: str, paused: bool) -> ScheduleRecord:
        async with self.pool.acquire() as conn, conn.transaction():
            record = await scheduler.set_paused(conn, name, paused)
            await transitions.audit(conn, self.actor, "pause-schedule" if paused else "resume-schedule", name)
            [record] = await _with_recent(conn, [record])
        return record

    @acts
    async def remove_schedule(self, name: str) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await scheduler.remove(conn, name)
            await transitions.audit(conn, self.actor, "remove-schedule", name)
