"""Periodic jobs: what a schedule is, and which of its ticks are due. Pure Python, no database:
`worker.scheduler` stores schedules and fires their ticks.

A schedule ticks by a cron expression in its timezone (cronsim, which handles daylight saving
time) or every N seconds (ticks at whole multiples of N since the Unix epoch, so they line up
whatever the time zone and whichever worker computes them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from jobdesk.core.errors import InvalidJob

MISFIRE_POLICIES = ("skip", "once", "all")
OVERLAP_POLICIES = ("allow", "skip")
MAX_CATCH_UP = 100  # `misfire all` runs at most this many missed ticks
# A tick fired this late still counts as on time: half a period, but at least 2 s (a busy worker
# is not down) and at most 10 s.
ON_TIME_MIN_S, ON_TIME_MAX_S = 2.0, 10.0


@dataclass
class Schedule:
    """A periodic job: a job of `type` with `input_data` at every tick."""

    name: str
    type: str
    input_data: dict[str, Any] = field(default_factory=dict)
    cron: str | None = None
    every_s: float | None = None
    timezone: str = "UTC"
    misfire: str = "skip"
    overlap: str = "allow"
    priority: int = 0

    def check(self) -> Schedule:
        """Raise InvalidJob naming what is wrong; return self when it is fine."""
        if not self.name or not self.name.strip():
            raise InvalidJob("a schedule needs a name")
        if not self.type or not self.type.strip():
            raise InvalidJob(f"schedule {self.name}: a job type is required")
        if (self.cron is None) == (self.every_s is None):
            raise InvalidJob(f"schedule {self.name}: give either a cron expression or an interval")
        if self.every_s is not None and not (self.every_s >= 1 and math.isfinite(self.every_s)):
            raise InvalidJob(f"schedule {self.name}: the interval must be at least 1 second")
        if not isinstance(self.input_data, dict):
            raise InvalidJob(f"schedule {self.name}: input must be a JSON object")
        zone(self.timezone)
        if self.cron is not None:
            try:
                CronSim(self.cron, datetime.now(UTC))
            except CronSimError as exc:
                raise InvalidJob(f"schedule {self.name}: bad cron expression {self.cron!r}: {exc}") from None
        if self.misfire not in MISFIRE_POLICIES:
            raise InvalidJob(f"schedule {self.name}: misfire must be one of {', '.join(MISFIRE_POLICIES)}")
        if self.overlap not in OVERLAP_POLICIES:
            raise InvalidJob(f"schedule {self.name}: overlap must be one of {', '.join(OVERLAP_POLICIES)}")
        return self

    @property
    def expression(self) -> str:
        """How the schedule ticks, in words a table can show."""
        if self.cron is not None:
            return self.cron
        from jobdesk.core.durations import format_duration

        return f"every {format_duration(self.every_s or 0)}"

    @property
    def description(self) -> str | None:
        """How the schedule ticks, in words: `At 09:00, Monday through Friday` (cron-descriptor),
        `Every 30 seconds`; None for a cron expression the library cannot put in words."""
        if self.cron is not None:
            return describe_cron(self.cron)
        return interval_words(self.every_s or 0)

    def next_tick(self, after: datetime) -> datetime:
        """The first tick strictly after `after` (in UTC)."""
        if self.every_s is not None:
            step = self.every_s
            k = math.floor(after.timestamp() / step) + 1
            return datetime.fromtimestamp(k * step, UTC)
        local = after.astimezone(zone(self.timezone))
        return next(iter(CronSim(self.cron or "", local))).astimezone(UTC)

    def last_ticks(self, until: datetime, since: datetime, limit: int) -> list[datetime]:
        """The ticks in [since, until], newest first, at most `limit` of them."""
        out: list[datetime] = []
        if self.every_s is not None:
            step = self.every_s
            k = math.floor(until.timestamp() / step)
            while len(out) < limit and k * step >= since.timestamp():
                out.append(datetime.fromtimestamp(k * step, UTC))
                k -= 1
            return out
        back = CronSim(self.cron or "", until.astimezone(zone(self.timezone)) + timedelta(microseconds=1),
                       reverse=True)
        for tick in back:
            tick = tick.astimezone(UTC)
            if tick < since or len(out) >= limit:
                break
            if tick <= until:
                out.append(tick)
        return out


@lru_cache(maxsize=256)
def describe_cron(expression: str) -> str | None:
    """A cron expression in words, by cron-descriptor with a 24-hour clock (imported when first
    needed: most commands never describe a schedule)."""
    from cron_descriptor import ExpressionDescriptor, Options

    options = Options()
    options.use_24hour_time_format = True
    try:
        return str(ExpressionDescriptor(expression, options).get_description())
    except Exception:  # noqa: BLE001 - any expression cronsim takes and the describer does not
        return None


_INTERVAL_UNITS = (("week", 7 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def interval_words(seconds: float) -> str:
    """`Every 30 seconds`, `Every hour`, `Every 90 minutes`, `Every 1.5 seconds`."""
    for unit, size in _INTERVAL_UNITS:
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"Every {unit}" if n == 1 else f"Every {n} {unit}s"
    return f"Every {seconds:g} seconds"


@dataclass(frozen=True)
class ScheduleRun:
    """A run of a schedule: the job a tick (or `jobdesk schedule run`) enqueued, its status now
    (None once the job is deleted), when it started, and how long it ran (None until it ends)."""

    job_id: str
    status: str | None
    tick_at: datetime
    started_at: datetime | None
    duration_s: float | None
    manual: bool = False

    def to_json(self) -> dict[str, object]:
        return {"job_id": self.job_id, "status": self.status, "tick_at": self.tick_at.isoformat(),
                "started_at": self.started_at.isoformat() if self.started_at else None,
                "duration_s": self.duration_s, "manual": self.manual}


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidJob(f"unknown timezone {name!r}; use a name like UTC or Europe/Berlin") from None


def due_ticks(schedule: Schedule, pending_from: datetime, now: datetime) -> tuple[list[datetime], datetime]:
    """Which ticks from `pending_from` (the first tick not handled yet) up to `now` get a job,
    oldest first, and the next tick to wait for.

    The newest due tick is on time when it is late by at most half a period (2 to 10 s); the
    others were missed while no worker ran. `skip` drops missed ticks, `once` runs the newest
    missed one as a single catch-up, `all` runs each (the newest 100).
    """
    following = schedule.next_tick(now)
    if pending_from > now:
        return [], pending_from
    due = schedule.last_ticks(now, pending_from, MAX_CATCH_UP + 1)  # newest first
    if not due:
        return [], following
    newest = due[0]
    grace = min(ON_TIME_MAX_S, max(ON_TIME_MIN_S, (following - newest).total_seconds() / 2))
    on_time = [newest] if (now - newest).total_seconds() <= grace else []
    missed = due[len(on_time):]
    if schedule.misfire == "skip":
        run = on_time
    elif schedule.misfire == "once":
        run = missed[:1] + on_time
    else:
        run = missed[:MAX_CATCH_UP] + on_time
    return sorted(run), following
