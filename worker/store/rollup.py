"""The metrics rollup the workers keep (`sql/014_worker_rollup.sql`), read by `stats_queries`.

A worker folds what its attempts did in memory, per UTC minute and job type: jobs completed and
failed for good, and each ended attempt's wait and run time in logarithmic bins. About once a
second it adds the fold to `job_stats` and `job_stats_hist` in one statement, so the claim and
the completion carry no extra work, and workers touch the shared minute rows once a second
rather than once per statement. A fold that cannot be written is kept and added to the next.

The same fold keeps, per 5 seconds and type, the jobs finished (completed or failed for good)
and the attempts failed, written to `job_stats_5s` in the same statement (sql/035): the last
5 minutes of each type, as `jobdesk types` shows them.

The queue depth by status is counted once per UTC minute, by the first worker to ask in that
minute; the same worker then drops the rollup rows no window reads any more.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import asyncpg

from jobdesk.store.db import EXPECTED_DB_ERRORS
from jobdesk.store.jobs import per_status_counts

log = logging.getLogger("jobdesk.worker")

FLUSH_INTERVAL_S = 1.0
DEPTH_INTERVAL_S = 15.0  # how often a worker checks that this minute's depth is counted
BINS = 56  # bin 0: under 1 ms; bin k: 2^((k-1)/2) to 2^(k/2) ms; the last bin is open-ended
QUEUE_STATUSES = ("queued", "in_progress", "waiting_approval")

# How long each grain is kept: minutes serve windows up to 24 hours, hours and days up to 30 days.
KEEP = {"m": "2 days", "h": "32 days", "d": "32 days"}
KEEP_DEPTH = "32 days"
KEEP_5S = "10 minutes"  # the 5-second rows serve the last 5 minutes
FIVE_S = 5


def stats_bin(secs: float | None) -> int:
    """The histogram bin of a duration in seconds."""
    if secs is None or secs < 0.001:
        return 0
    return min(BINS - 1, 1 + math.floor(2 * math.log2(secs * 1000)))


def _minute(at: float) -> int:
    return int(at // 60) * 60


def five_s_bucket(at: float) -> int:
    """The start of the 5-second bucket of an epoch time, in epoch seconds."""
    return int(at // FIVE_S) * FIVE_S


@dataclass
class Fold:
    """What attempts did, per (minute, type): [completed, failed]; per (minute, type, metric, bin): n;
    per (5-second bucket, type): [finished, failed attempts]."""

    counts: dict[tuple[int, str], list[int]] = field(default_factory=dict)
    bins: dict[tuple[int, str, str, int], int] = field(default_factory=dict)
    fives: dict[tuple[int, str], list[int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.counts or self.bins or self.fives)

    def merge(self, other: Fold) -> None:
        for key, (completed, failed) in other.counts.items():
            row = self.counts.setdefault(key, [0, 0])
            row[0] += completed
            row[1] += failed
        for bkey, n in other.bins.items():
            self.bins[bkey] = self.bins.get(bkey, 0) + n
        for key, (finished, failed) in other.fives.items():
            row = self.fives.setdefault(key, [0, 0])
            row[0] += finished
            row[1] += failed


class Rollup:
    """One worker's fold since its last write. The event loop is its only writer."""

    def __init__(self) -> None:
        self.fold = Fold()
        self.writing = asyncio.Lock()  # one write at a time: a stopping worker's last one waits its turn

    def attempt_ended(self, job_type: str, wait_s: float | None, run_s: float | None, *,
                      completed: bool = False, failed: bool = False, attempt_failed: bool = False,
                      at: float | None = None) -> None:
        """An attempt that completed, failed (for good or to be retried) or waits for approval.
        `failed`: the job failed for good; `attempt_failed`: the attempt failed (retried or not)."""
        when = time.time() if at is None else at
        minute = _minute(when)
        if completed or failed:
            row = self.fold.counts.setdefault((minute, job_type), [0, 0])
            row[0] += completed
            row[1] += failed
        if completed or failed or attempt_failed:
            five = self.fold.fives.setdefault((five_s_bucket(when), job_type), [0, 0])
            five[0] += completed or failed
            five[1] += attempt_failed or failed
        bins = self.fold.bins
        for metric, secs in (("wait", wait_s), ("run", run_s)):
            if secs is not None:
                key = (minute, job_type, metric, stats_bin(secs))
                bins[key] = bins.get(key, 0) + 1

    def take(self) -> Fold:
        fold, self.fold = self.fold, Fold()
        return fold

    def give_back(self, fold: Fold) -> None:
        """A fold whose write failed: it goes out with the next one."""
        fold.merge(self.fold)
        self.fold = fold


# Rows in key order, so that two workers never take the same rows in opposite orders.
_ADD = """
WITH counts AS (
    INSERT INTO job_stats AS t (grain, bucket, type, completed, failed)
    SELECT g.grain, date_trunc(g.unit, c.at, 'UTC'), c.type, sum(c.completed), sum(c.failed)
      FROM unnest($1::timestamptz[], $2::text[], $3::int[], $4::int[]) AS c(at, type, completed, failed)
     CROSS JOIN (VALUES ('m', 'minute'), ('h', 'hour')) g(grain, unit)
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (grain, bucket, type) DO UPDATE
       SET completed = t.completed + EXCLUDED.completed, failed = t.failed + EXCLUDED.failed
    RETURNING 1
), fives AS (
    INSERT INTO job_stats_5s AS t (bucket, type, finished, failed)
    SELECT f.at, f.type, sum(f.finished), sum(f.failed)
      FROM unnest($10::timestamptz[], $11::text[], $12::int[], $13::int[]) AS f(at, type, finished, failed)
     GROUP BY 1, 2
     ORDER BY 1, 2
    ON CONFLICT (bucket, type) DO UPDATE
       SET finished = t.finished + EXCLUDED.finished, failed = t.failed + EXCLUDED.failed
    RETURNING 1
)  -- a data-modifying CTE always runs to the end
INSERT INTO job_stats_hist AS t (grain, bucket, type, metric, bin, n)
SELECT g.grain, date_trunc(g.unit, h.at, 'UTC'), h.type, h.metric, h.bin, sum(h.n)
  FROM unnest($5::timestamptz[], $6::text[], $7::text[], $8::smallint[], $9::int[]) AS h(at, type, metric, bin, n)
 CROSS JOIN (VALUES ('m', 'minute'), ('h', 'hour'), ('d', 'day')) g(grain, unit)
 GROUP BY 1, 2, 4, 3, 5
 ORDER BY 1, 2, 4, 3, 5
ON CONFLICT (grain, bucket, metric, type, bin) DO UPDATE SET n = t.n + EXCLUDED.n
"""


def _at(minute: int) -> datetime:
    return datetime.fromtimestamp(minute, UTC)


async def write(conn: asyncpg.Connection, fold: Fold) -> None:
    """Add a fold to the rollup, in one statement."""
    counts = sorted(fold.counts.items())
    bins = sorted(fold.bins.items())
    fives = sorted(fold.fives.items())
    await conn.execute(
        _ADD,
        [_at(m) for (m, _), _ in counts], [t for (_, t), _ in counts],
        [c for _, (c, _) in counts], [f for _, (_, f) in counts],
        [_at(k[0]) for k, _ in bins], [k[1] for k, _ in bins], [k[2] for k, _ in bins],
        [k[3] for k, _ in bins], [n for _, n in bins],
        [_at(b) for (b, _), _ in fives], [t for (_, t), _ in fives],
        [n for _, (n, _) in fives], [f for _, (_, f) in fives])


async def write_finished(conn: asyncpg.Connection, rows: Iterable[Mapping[str, Any]]) -> None:
    """Add jobs inserted already finished to the rollup, as the worker that ran them would have:
    rows with `type`, `status`, `at` (epoch seconds), `wait_s` and `run_s`; only completed and
    failed ones count. For demo data and benchmarks."""
    rollup = Rollup()
    for r in rows:
        if r["status"] in ("completed", "failed"):
            rollup.attempt_ended(r["type"], r["wait_s"], r["run_s"], completed=r["status"] == "completed",
                                 failed=r["status"] == "failed", at=r["at"])
    await write(conn, rollup.take())


# Counts this minute's depth unless a worker already has (the one-time filter skips the count).
_SAMPLE_DEPTH = """
INSERT INTO job_queue_depth (bucket, status, n)
SELECT date_trunc('minute', now(), 'UTC'), c.status, c.n
  FROM ({counts}) c
 WHERE NOT EXISTS (SELECT 1 FROM job_queue_depth
                    WHERE status = $1 AND bucket = date_trunc('minute', now(), 'UTC'))
ON CONFLICT DO NOTHING
"""

_DROP_OLD = [
    *(f"DELETE FROM job_stats WHERE grain = '{g}' AND bucket < now() - interval '{keep}'"
      for g, keep in KEEP.items() if g != "d"),
    *(f"DELETE FROM job_stats_hist WHERE grain = '{g}' AND bucket < now() - interval '{keep}'"
      for g, keep in KEEP.items()),
    f"DELETE FROM job_queue_depth WHERE bucket < now() - interval '{KEEP_DEPTH}'",
    f"DELETE FROM job_stats_5s WHERE bucket < now() - interval '{KEEP_5S}'",
]


async def sample_depth(conn: asyncpg.Connection, statuses: Iterable[str] = QUEUE_STATUSES) -> bool:
    """Count this minute's queue depth if no worker has yet; then drop what no window reads.
    Returns whether this call took the count."""
    statuses = list(statuses)
    status = await conn.execute(_SAMPLE_DEPTH.format(counts=per_status_counts(statuses)), statuses[0])
    if int(status.split()[-1]) == 0:
        return False
    for sql in _DROP_OLD:
        await conn.execute(sql)
    return True


T = TypeVar("T")


class DbCall(Protocol):
    """Runs `fn(conn)` on one of the worker's connections and gives its result (the worker's
    `db.call`, which retries while the database is unreachable)."""

    def __call__(self, fn: Callable[[asyncpg.Connection], Awaitable[T]], /) -> Awaitable[T]: ...


async def flush(db_call: DbCall, rollup: Rollup) -> None:
    """Write what the rollup holds, after any write in flight; on failure keep it for the next."""
    async with rollup.writing:
        fold = rollup.take()
        if not fold:
            return
        try:
            await db_call(lambda conn: write(conn, fold))
        except BaseException:
            rollup.give_back(fold)
            raise


async def run_loop(db_call: DbCall, rollup: Rollup, stopping: asyncio.Event) -> None:
    """A worker's share of the rollup: its fold about once a second, the depth once a minute.
    Ends when the worker stops, leaving the last write to it (`flush`)."""
    next_depth = 0.0
    while not stopping.is_set():
        try:
            async with asyncio.timeout(FLUSH_INTERVAL_S):
                await stopping.wait()
            return  # the stopping worker writes the rest itself, once its last jobs are recorded
        except TimeoutError:
            pass
        try:
            await flush(db_call, rollup)
            if time.monotonic() >= next_depth and not stopping.is_set():
                await db_call(sample_depth)
                next_depth = time.monotonic() + DEPTH_INTERVAL_S
        except asyncio.CancelledError:
            raise
        except EXPECTED_DB_ERRORS as exc:  # the database is away: the worker's own loops say so
            log.debug("rollup: %s", exc)
        except Exception:
            log.exception("rollup: writing the metrics failed; trying again")
