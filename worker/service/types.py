"""Job types across the fleet: listed with their limits in force and their activity at a glance
(running, queued, the last 5 minutes), paused and resumed, and their limits and rates set at run
time. Every input is checked (`jobdesk.core.type_controls`) before anything is written; each
change is audited and announced to the workers in one transaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import asyncpg

from jobdesk.core.errors import InvalidJob
from jobdesk.core.type_controls import TypeControl, check_type_name, parse_limit_changes
from jobdesk.service.access import acts
from jobdesk.service.base import ServiceBase
from jobdesk.store import type_activity, type_controls

REASON_MAX = 1000  # characters of a pause's reason


async def _with_activity(conn: asyncpg.Connection, records: list[TypeControl]) -> list[TypeControl]:
    activity = await type_activity.type_activity(conn, [r.type for r in records])
    return [dataclasses.replace(r, activity=activity[r.type]) for r in records]


class TypeControls(ServiceBase):
    """Pause, resume and limit job types; list them."""

    async def types(self) -> list[TypeControl]:
        """Every known type, by name: paused or not, its limits in force and where each came from,
        and its activity: running and queued now, finished and failed in the last 5 minutes."""
        async with (await self._read_pool()).acquire() as conn:
            return await _with_activity(conn, await type_controls.list_types(conn))

    async def type_control(self, job_type: str) -> TypeControl:
        """One type's controls and activity, read on the primary (right after a change)."""
        async with self.pool.acquire() as conn:
            found = await type_controls.list_types(conn, job_type)
            return (await _with_activity(conn, found or [TypeControl(job_type)]))[0]

    @acts
    async def pause_type(self, job_type: str, reason: str | None = None) -> TypeControl:
        """Pause a type across the fleet: its jobs stay queued, every worker stops claiming it
        within a poll interval, running jobs finish. Audited with the reason and the actor."""
        job_type = check_type_name(job_type)
        if reason is not None and not isinstance(reason, str):
            raise InvalidJob("reason: must be text", field="reason")
        reason = (reason or "").strip() or None
        if reason is not None and len(reason) > REASON_MAX:
            raise InvalidJob(f"reason: {len(reason)} characters long; at most {REASON_MAX}", field="reason")
        async with self.pool.acquire() as conn:
            await type_controls.pause(conn, job_type, self.actor, reason)
        return await self.type_control(job_type)

    @acts
    async def resume_type(self, job_type: str) -> TypeControl:
        """Resume a paused type: workers claim it again at once. Audited."""
        job_type = check_type_name(job_type)
        async with self.pool.acquire() as conn:
            await type_controls.resume(conn, job_type, self.actor)
        return await self.type_control(job_type)

    @acts
    async def set_type_limits(self, job_type: str, changes: Mapping[str, object], *,
                              clear: bool = False) -> TypeControl:
        """Set a type's limits at run time, by name (`limit`, `rate`, `user_limit`, `user_rate`;
        None clears the operator's value, and the setting's default is in force again); with
        `clear`, every one of them first. Checked whole before anything is written. Audited."""
        job_type = check_type_name(job_type)
        parsed = parse_limit_changes(changes)
        if not parsed and not clear:
            raise InvalidJob("no limit given; set limit, rate, user_limit or user_rate, or clear them")
        async with self.pool.acquire() as conn:
            await type_controls.set_limits(conn, job_type, parsed, self.actor, clear=clear)
        return await self.type_control(job_type)
