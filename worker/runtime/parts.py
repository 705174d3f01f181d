"""What the parts of one worker are built from, grouped by what travels together: what every part
shares (`Shared`), what a run is given besides its processor (`RunAids`), the time limits of runs
(`TimeLimits`), and what the pumps claim (`Claiming`). `Worker` makes them once and hands them to
`Execution` and `Pumps`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobdesk.core.limits import ClaimLimits
    from jobdesk.observe.metrics import WorkerMetrics
    from jobdesk.runtime.dblink import DbLink
    from jobdesk.runtime.durable import Durability
    from jobdesk.runtime.job_reports import Reports
    from jobdesk.runtime.outcomes import Outcomes
    from jobdesk.runtime.pump import Kicks
    from jobdesk.runtime.threads import JobThreads


@dataclass(frozen=True)
class Shared:
    """What the parts of one worker share."""

    db: DbLink
    worker_id: str
    outcomes: Outcomes  # where each finished job's outcome goes, to be written in batches
    kicks: Kicks  # wakes the pumps: new work, a finished job, a stop request
    stop: asyncio.Event  # set once the worker stops: from then on no job starts and no claim is made
    metrics: WorkerMetrics | None  # None unless JOB_METRICS_PORT is set
    stats: dict[str, int]  # the worker's counters (claimed, rounds, completed...)


@dataclass(frozen=True)
class RunAids:
    """What a run is given besides its processor: its durable calls (`job.step`, `job.sleep`...),
    the keeper of its progress and log lines, and the threads that run plain `def` processors (made
    for the worker's concurrency when None)."""

    durability: Durability | None = None
    reports: Reports | None = None
    threads: JobThreads | None = None


@dataclass(frozen=True)
class TimeLimits:
    """The limits of a run besides a processor's own `timeout`: JOB_TYPE_TIMEOUTS and JOB_TIMEOUT."""

    per_type: Mapping[str, float] = field(default_factory=dict)
    default: float | None = None


@dataclass(frozen=True)
class Claiming:
    """What the pumps claim: the worker's types, the longest a pump waits with nothing to do
    (seconds), and the claim limits of the types."""

    types: list[str]
    poll: float
    limits: ClaimLimits
