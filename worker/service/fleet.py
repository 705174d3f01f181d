"""The fleet: workers, their commands, the limits on their claims, and pruning. (Whether this role may
write is `access.write_refusal`.)"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

from jobdesk.core.errors import InvalidJob
from jobdesk.core.limits import LimitUse
from jobdesk.runtime import retention
from jobdesk.service.access import acts
from jobdesk.service.base import ServiceBase
from jobdesk.service.read_models import WorkersView
from jobdesk.store import fleet, flow_limits
from jobdesk.store.fleet import WorkerRecord


class FleetControl(ServiceBase):
    """Workers and the database's upkeep."""

    async def workers(self, *, include_stopped: bool = True) -> list[WorkerRecord]:
        async with (await self._read_pool()).acquire() as conn:
            return await fleet.list_workers(conn, include_stopped=include_stopped)

    async def limits(self) -> list[LimitUse]:
        """Every limit on the claims (rates, per user, fair share, per type), its use now and how
        many runnable jobs it holds back."""
        async with (await self._read_pool()).acquire() as conn:
            return await flow_limits.limit_uses(conn)

    async def workers_view(self, lease_timeout_s: float, *, served_before: frozenset[str] | None = None,
                           with_unserved: bool = False) -> WorkersView:
        """Every worker, the types live workers serve, and the unserved queued types when asked
        for (or when the served types changed since `served_before`)."""
        async with (await self._read_pool()).acquire() as conn:
            workers = await fleet.list_workers(conn)
            served = frozenset(t for w in workers if w.state in fleet.LIVE_STATES
                               and not w.is_lost(lease_timeout_s) for t in w.job_types)
            unserved = None
            if with_unserved or served != served_before:
                unserved = await fleet.unserved_types(conn, lease_timeout_s)
        return WorkersView(workers, served, unserved)

    @acts
    async def worker_command(self, worker_id: str, command: str) -> WorkerRecord:
        """Ask a worker to pause, resume, drain or stop; the worker acts on it at once."""
        async with self.pool.acquire() as conn:
            return await fleet.request(conn, worker_id, command)

    @acts
    async def prune(self, *, dry_run: bool = False, older_than: float | None = None,
                    statuses: Sequence[str] = ()) -> retention.PruneResult:
        """Prune now, as a worker's pruner does: finished jobs past their retention (or past
        `older_than` seconds), for `statuses` (default: completed, cancelled, failed and the
        audit log). A dry run counts and changes nothing. PruneBusy if a pruner is running."""
        unknown = [s for s in statuses if s not in retention.PRUNABLE]
        if unknown:
            raise InvalidJob(f"cannot prune {unknown[0]!r}; use {', '.join(retention.PRUNABLE)}")
        keep = retention.cutoffs(self.settings)
        chosen = {s: (older_than if older_than is not None else keep[s])
                  for s in retention.PRUNABLE if not statuses or s in statuses}
        holder = f"{self.actor.source} on {socket.gethostname()}, pid {os.getpid()}"
        result = await retention.prune(self.pool, holder, chosen,
                                       failed_retention=self.settings.JOB_RETENTION_FAILED, dry_run=dry_run)
        if result is None:
            async with self.pool.acquire() as conn:
                running = await retention.lease_holder(conn)
            raise retention.PruneBusy(f"another pruner is running ({running or 'a worker'}); try again shortly")
        return result
