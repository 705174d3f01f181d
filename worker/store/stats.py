"""Queue metrics from the rollup the workers keep (`worker/stats_rollup.py`): throughput, queue
depth and wait/run percentiles per type over a window, the table's size, and what needs an operator.

The charts read the small rollup (one row per minute or hour and type), never the finished jobs,
so their cost depends on the window and the number of types, not on how many jobs there are.
Only the depth now is counted from `jobs`, through the status index: it reads the unfinished
jobs, not the finished ones.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from jobdesk.core.errors import JobdeskError
from jobdesk.core.json_value import JsonObject
from jobdesk.store.jobs import per_status_counts
from jobdesk.store.rollup import BINS, QUEUE_STATUSES

MAX_SPAN = timedelta(days=30)

_SPAN = re.compile(r"^\s*(\d+)\s*([mhd])\s*$")
_UNITS = {"m": 60, "h": 3600, "d": 86400}


class BadWindow(JobdeskError):
    """A `--since` value that is not a duration such as 15m, 1h, 24h or 7d."""


@dataclass(frozen=True)
class Window:
    """A time window and how it is read: the rollup grain of each part, and the chart's step."""

    label: str
    span: timedelta

    @property
    def counts_grain(self) -> str:  # completed/failed and depth changes
        return "m" if self.span <= timedelta(days=1) else "h"

    @property
    def hist_grain(self) -> str:  # wait/run bins: per minute up to 6 hours, else hours then days
        return "m" if self.span <= timedelta(hours=6) else "h"

    @property
    def step(self) -> timedelta:
        """The chart's bucket: about 60 to 170 points over the window, whole minutes or hours."""
        minutes = max(1, math.ceil(self.span.total_seconds() / 60 / 170))
        if self.counts_grain == "h":
            return timedelta(hours=max(1, math.ceil(minutes / 60)))
        for nice in (1, 2, 5, 10, 15, 30, 60):
            if nice >= minutes:
                return timedelta(minutes=nice)
        return timedelta(minutes=minutes)


def parse_window(text: str) -> Window:
    """`15m`, `1h`, `24h`, `7d`… up to 30 days."""
    match = _SPAN.match(text)
    if not match:
        raise BadWindow(f"--since must be a duration such as 15m, 1h, 24h or 7d, not {text!r}")
    span = timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
    if not timedelta(minutes=1) <= span <= MAX_SPAN:
        raise BadWindow(f"--since must be between 1m and 30d, not {text!r}")
    return Window(text.strip(), span)


WINDOWS = {label: parse_window(label) for label in ("1h", "24h", "7d")}


@dataclass
class Throughput:
    """Jobs completed and failed for good in each step of the window (`times` are step starts)."""

    step: timedelta
    times: list[datetime] = field(default_factory=list)
    completed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)

    def per_minute(self, counts: Sequence[int]) -> list[float]:
        minutes = self.step.total_seconds() / 60
        return [n / minutes for n in counts]


@dataclass
class Depth:
    """Jobs per status now, and the queue statuses at the end of each step of the window."""

    now: dict[str, int] = field(default_factory=dict)
    times: list[datetime] = field(default_factory=list)
    series: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class Latency:
    """Wait and run time percentiles of one job type's attempts in the window, in seconds."""

    type: str
    attempts: int
    wait_p50: float | None
    wait_p95: float | None
    run_p50: float | None
    run_p95: float | None

    def to_json(self) -> JsonObject:
        return dict(self.__dict__)


@dataclass
class Metrics:
    window: Window
    since: datetime
    until: datetime
    throughput: Throughput
    depth: Depth
    latency: list[Latency]

    @property
    def completed(self) -> int:
        return sum(self.throughput.completed)

    @property
    def failed(self) -> int:
        return sum(self.throughput.failed)

    def to_json(self) -> JsonObject:
        tp = self.throughput
        return {
            "since": self.since.isoformat(), "until": self.until.isoformat(), "window": self.window.label,
            "completed": self.completed, "failed": self.failed,
            "queue": self.depth.now,
            "per_minute": {"step_seconds": int(tp.step.total_seconds()),
                           "times": [t.isoformat() for t in tp.times],
                           "completed": tp.per_minute(tp.completed), "failed": tp.per_minute(tp.failed)},
            "depth": {"times": [t.isoformat() for t in self.depth.times], **self.depth.series},
            "types": [lat.to_json() for lat in self.latency],
        }




@dataclass(frozen=True)
class Attention:
    """What the tray shows: jobs failed for good in the last hour, and those waiting for approval."""

    failed_last_hour: int
    waiting_approval: int
    db_now: datetime
    cap: int | None = None  # a count past it is "at least cap" (each count stops there)

    def shown(self, n: int) -> str:
        """A count as the tray shows it: "10,000+" past the cap."""
        return f"{self.cap:,}+" if self.cap is not None and n > self.cap else f"{n:,}"


@dataclass(frozen=True)
class Transition:
    """A job that failed for good or started waiting for approval."""

    id: str
    type: str
    status: str
    updated_at: datetime
    attempts: int = 0  # with the status, tells a new failure (after a retry) from the same one


# -- queries ----------------------------------------------------------------------------------

STATUS_COUNTS_SQL = per_status_counts(QUEUE_STATUSES)

# $3: one type, or NULL for all of them (the primary key leads with grain and bucket; the type is
# filtered among the window's rows).
COUNTS_SQL = """
SELECT bucket, sum(completed)::bigint AS completed, sum(failed)::bigint AS failed
  FROM job_stats
 WHERE grain = $1 AND bucket >= $2 AND ($3::text IS NULL OR type = $3)
 GROUP BY bucket
 ORDER BY bucket
"""

# Per point of the chart (the end of each step) and status: the last count before it, if one
# was taken in the hour before (with no worker running, none is).
DEPTH_SQL = """
SELECT e.i, q.status, d.n
  FROM generate_series(0, $3::int - 1) AS e(i)
 CROSS JOIN unnest($4::text[]) AS q(status)
 CROSS JOIN LATERAL (SELECT n FROM job_queue_depth
                      WHERE status = q.status AND bucket < $1::timestamptz + (e.i + 1) * $2::interval
                        AND bucket >= $1::timestamptz + (e.i + 1) * $2::interval - $2::interval - interval '1 hour'
                      ORDER BY bucket DESC LIMIT 1) d
"""

HIST_SQL = """
SELECT type, metric, bin, sum(n)::bigint AS n
  FROM job_stats_hist
 WHERE grain = $1 AND bucket >= $2 AND bucket < $3 AND ($4::text IS NULL OR type = $4)
 GROUP BY type, metric, bin
"""

# Beyond 6 hours: the hours before the first whole UTC day of the window, then whole days.
HIST_HOURS_DAYS_SQL = """
SELECT type, metric, bin, sum(n)::bigint AS n
  FROM (SELECT type, metric, bin, n FROM job_stats_hist WHERE grain = 'h' AND bucket >= $1 AND bucket < $2
        UNION ALL
        SELECT type, metric, bin, n FROM job_stats_hist WHERE grain = 'd' AND bucket >= $2) x
 WHERE $3::text IS NULL OR type = $3
 GROUP BY type, metric, bin
"""

# Both through indexes (jobs_finished_idx, jobs_status_idx), and capped: they read at most
# ATTENTION_CAP + 1 jobs each, however many fail or wait, so that every open console pays the same.
ATTENTION_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'failed'
                                 AND updated_at >= now() - interval '1 hour' LIMIT $1) AS f) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'waiting_approval' LIMIT $1) AS w) AS waiting,
       now() AS db_now
"""
ATTENTION_CAP = 10_000

# One read per status, each through its own index (jobs_finished_idx, jobs_waiting_approval_idx):
# they read the jobs that changed since `since`, not every failed or waiting job.
TRANSITIONS_SQL = """
SELECT * FROM (
    (SELECT id, type, status, updated_at, attempts FROM jobs
      WHERE status = 'failed' AND updated_at > $1 ORDER BY updated_at DESC LIMIT $2)
    UNION ALL
    (SELECT id, type, status, updated_at, attempts FROM jobs
      WHERE status = 'waiting_approval' AND updated_at > $1 ORDER BY updated_at DESC LIMIT $2)) AS t
 ORDER BY updated_at DESC
 LIMIT $2
"""


def _floor(at: datetime, step: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + (at - epoch) // step * step


def _next_day(at: datetime) -> datetime:
    """The first UTC midnight at or after `at`."""
    day = _floor(at, timedelta(days=1))
    return day if day == at else day + timedelta(days=1)


async def fetch_metrics(conn: asyncpg.Connection, window: Window, job_type: str | None = None) -> Metrics:
    """Throughput, depth and latency over `window`, read in one snapshot. With `job_type`, the
    throughput and the latency are that type's; the depth is of every type (the depth counts the
    workers take are per status only)."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        db_now: datetime = await conn.fetchval("SELECT now()")
        since = db_now - window.span
        counts_from = _floor(since, timedelta(minutes=1) if window.counts_grain == "m" else timedelta(hours=1))
        hist_from = _floor(since, timedelta(minutes=1) if window.hist_grain == "m" else timedelta(hours=1))
        status_rows = await conn.fetch(STATUS_COUNTS_SQL)
        count_rows = await conn.fetch(COUNTS_SQL, window.counts_grain, counts_from, job_type)
        start, points = chart_points(window, since, db_now)
        depth_rows = await conn.fetch(DEPTH_SQL, start, window.step, points, list(QUEUE_STATUSES))
        if window.hist_grain == "m":
            hist_rows = await conn.fetch(HIST_SQL, "m", hist_from, db_now + timedelta(minutes=1), job_type)
        else:
            hist_rows = await conn.fetch(HIST_HOURS_DAYS_SQL, hist_from, _next_day(hist_from), job_type)
    return Metrics(window, since, db_now, *_series(window, since, db_now, status_rows, count_rows, depth_rows),
                   latency_from_bins(hist_rows))


def chart_points(window: Window, since: datetime, until: datetime) -> tuple[datetime, int]:
    """The start of the chart's first step, and how many steps reach `until`."""
    start = _floor(since, window.step)
    return start, int((until - start) // window.step) + 1


def _series(window: Window, since: datetime, until: datetime, status_rows: Sequence[Any],
            count_rows: Sequence[Any], depth_rows: Sequence[Any]) -> tuple[Throughput, Depth]:
    step = window.step
    start, n = chart_points(window, since, until)
    times = [start + i * step for i in range(n)]
    completed, failed = [0] * n, [0] * n
    for row in count_rows:
        i = min(n - 1, max(0, int((row["bucket"] - start) // step)))  # a partial first bucket joins step 0
        completed[i] += row["completed"]
        failed[i] += row["failed"]
    now_counts = {status: 0 for status in QUEUE_STATUSES}
    now_counts.update({r["status"]: int(r["n"]) for r in status_rows})
    # The depth at the end of each step: the last count taken before that end; the last step is
    # the depth now.
    series = {status: [0] * n for status in QUEUE_STATUSES}
    for row in depth_rows:
        series[row["status"]][row["i"]] = int(row["n"])
    for status in QUEUE_STATUSES:
        series[status][-1] = now_counts[status]
    return Throughput(step, times, completed, failed), Depth(now_counts, times, series)


def bin_bounds(b: int) -> tuple[float, float]:
    """The seconds that bin `b` covers (the last bin is open-ended: its upper bound is its lower)."""
    if b <= 0:
        return 0.0, 0.001
    low = 2 ** ((b - 1) / 2) / 1000
    return (low, low) if b >= BINS - 1 else (low, 2 ** (b / 2) / 1000)


def percentile(bins: dict[int, int], q: float) -> float | None:
    """The q-quantile of a binned distribution, interpolated geometrically inside its bin."""
    total = sum(bins.values())
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for b in sorted(bins):
        n = bins[b]
        if n and seen + n >= rank:
            low, high = bin_bounds(b)
            frac = (rank - seen) / n
            if b == 0 or low == high:
                return low + (high - low) * frac
            return float(low * (high / low) ** frac)
        seen += n
    return bin_bounds(max(bins))[0]


def latency_from_bins(rows: Sequence[Any]) -> list[Latency]:
    by_type: dict[str, dict[str, dict[int, int]]] = {}
    for row in rows:
        by_type.setdefault(row["type"], {"wait": {}, "run": {}})[row["metric"]][row["bin"]] = int(row["n"])
    out = []
    for type_, metrics in sorted(by_type.items()):
        wait, run = metrics["wait"], metrics["run"]
        out.append(Latency(type_, sum(run.values()), percentile(wait, 0.5), percentile(wait, 0.95),
                           percentile(run, 0.5), percentile(run, 0.95)))
    return out


async def fetch_attention(conn: asyncpg.Connection) -> Attention:
    row = await conn.fetchrow(ATTENTION_SQL, ATTENTION_CAP + 1)
    return Attention(int(row["failed"]), int(row["waiting"]), row["db_now"], ATTENTION_CAP)


async def fetch_transitions(conn: asyncpg.Connection, since: datetime, *, limit: int = 500) -> list[Transition]:
    """Jobs that became failed or waiting_approval after `since` (newest first, at most `limit`)."""
    rows = await conn.fetch(TRANSITIONS_SQL, since, limit)
    return [Transition(r["id"], r["type"], r["status"], r["updated_at"], r["attempts"]) for r in rows]
