"""What one run of a job reports while it runs: its progress and its own log lines.

A processor calls `job.progress(...)` and `job.log(...)` from its task, from a thread it runs
in, or from any thread it starts; the logging handler adds the records of any logger. All of
them land here, under a lock, and return at once: the worker's writer takes what is pending a
few times a second and writes it in one statement (`jobdesk.runtime.job_reports`). So a
processor that reports in a tight loop costs the database a few writes a second, and the last
value is always the one written.

The log lines of a run are bounded (JOB_LOG_MAX_LINES, JOB_LOG_MAX_BYTES): past either bound
lines are counted, not kept, and the end of the run adds one line that says how many were dropped.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobdesk.core.pg_text import escaped

# A job in these statuses runs no more (held for approval, its processor has returned): its log
# lines are all written, since a worker writes them before the outcome.
LOGS_FINISHED = frozenset({"completed", "failed", "cancelled", "waiting_approval"})
MESSAGE_MAX_CHARS = 1000  # a progress message is cut here: it is a status line, not a log
LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}  # as `logging` numbers them
DROPPED_LOGGER = "jobdesk"


class Reported:
    """What `job.progress` and `job.log` return: an awaitable that is already done, so that
    `await job.progress(...)` in async code and a bare `job.progress(...)` in a thread do the
    same, and a forgotten `await` loses nothing."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # makes this a generator that ends at once

    def __repr__(self) -> str:
        return "<reported>"


DONE = Reported()


def check_fraction(fraction: object) -> float:
    """`fraction` as a float from 0 to 1; ValueError for anything else (a bool, NaN, a string).
    Any real number will do: a numpy float or integer, a Fraction."""
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real):
        raise ValueError(f"progress must be a number from 0 to 1, got {type(fraction).__name__} {fraction!r}")
    value = float(fraction)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"progress must be a number from 0 to 1, got {fraction!r}")
    return value


def check_message(message: object) -> str | None:
    if message is None:
        return None
    if not isinstance(message, str):
        raise ValueError(f"a progress message must be a string, got {type(message).__name__}")
    cut = message if len(message) <= MESSAGE_MAX_CHARS else message[:MESSAGE_MAX_CHARS - 1] + "…"
    return escaped(cut)


@dataclass(frozen=True, slots=True)
class Progress:
    """A progress reported, not written yet."""

    fraction: float
    message: str | None
    at: float  # time.time()


@dataclass(frozen=True, slots=True)
class LogLine:
    """A log line kept, not written yet: `seq` orders it within its attempt, from 1."""

    seq: int
    at: float  # time.time()
    level: str
    logger: str
    message: str
    trace_id: str | None = None
    span_id: str | None = None


# -- what the doors read back (stored by `jobdesk.store.job_reports`) ------------------------

@dataclass(frozen=True)
class JobProgress:
    """How far a job got, as its processor last said."""

    fraction: float
    message: str | None
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "message": self.message, "at": self.at.astimezone(UTC).isoformat()}


@dataclass(frozen=True)
class JobLogLine:
    """One stored log line of a job."""

    attempt: int
    seq: int
    at: datetime
    level: str
    logger: str
    message: str
    trace_id: str | None = None
    span_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "seq": self.seq, "at": self.at.astimezone(UTC).isoformat(),
                "level": self.level, "logger": self.logger, "message": self.message,
                "trace_id": self.trace_id, "span_id": self.span_id}


# -- what a run fills ---------------------------------------------------------------------


class JobReport:
    """The pending progress and log lines of one run (job id, attempt), safe to fill from any
    thread. `wake` is called, from the thread that reported, when the report turns from clean to
    pending: once per write at most, however often the processor reports meanwhile."""

    def __init__(self, job_id: str, attempt: int, *, max_lines: int, max_bytes: int, min_level: int = 20,
                 wake: Callable[[], None] | None = None) -> None:
        """`min_level`: the lowest `logging` level kept (JOB_LOG_LEVEL)."""
        self.job_id = job_id
        self.min_level = min_level
        self.attempt = attempt
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.wake = wake
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._lines: list[LogLine] = []
        self._seq = 0
        self._kept_bytes = 0
        self.dropped = 0
        self.dropped_bytes = 0
        self._pending = False
        self.closed = False

    def set_progress(self, fraction: float, message: str | None) -> None:
        """Record checked values (`check_fraction`, `check_message`); the last one set is written."""
        at = time.time()
        with self._lock:
            if self.closed:
                return
            self._progress = Progress(fraction, message, at)
            wake = self._mark_pending()
        if wake is not None:
            wake()

    def add_line(self, level: str, logger: str, message: str, at: float | None = None,
                 trace_id: str | None = None, span_id: str | None = None) -> None:
        """Keep one log line, unless the run's bounds are reached (then it is counted as dropped)."""
        text = escaped(message)
        size = len(text.encode("utf-8", "replace"))
        when = time.time() if at is None else at
        with self._lock:
            if self.closed:
                return
            if self._seq >= self.max_lines or self._kept_bytes + size > self.max_bytes:
                self.dropped += 1
                self.dropped_bytes += size
                return
            self._seq += 1
            self._kept_bytes += size
            self._lines.append(LogLine(self._seq, when, level, escaped(logger), text, trace_id, span_id))
            wake = self._mark_pending()
        if wake is not None:
            wake()

    def _mark_pending(self) -> Callable[[], None] | None:
        if self._pending:
            return None
        self._pending = True
        return self.wake

    @property
    def pending(self) -> bool:
        return self._pending

    def take(self) -> tuple[Progress | None, list[LogLine]]:
        """What is pending, emptied: the last progress (None if unchanged) and the new lines."""
        with self._lock:
            progress, lines = self._progress, self._lines
            self._progress, self._lines, self._pending = None, [], False
        return progress, lines

    def close(self) -> tuple[Progress | None, list[LogLine]]:
        """The run has ended: nothing more is kept. What is pending, with one last line saying how
        many lines were dropped, if any were."""
        with self._lock:
            self.closed = True
            if self.dropped:
                self._seq += 1
                self._lines.append(LogLine(
                    self._seq, time.time(), "WARNING", DROPPED_LOGGER,
                    f"{self.dropped} more log line(s) of this attempt ({self.dropped_bytes} bytes) were dropped: "
                    f"an attempt keeps at most {self.max_lines} lines and {self.max_bytes} bytes "
                    f"(JOB_LOG_MAX_LINES, JOB_LOG_MAX_BYTES)"))
        return self.take()
