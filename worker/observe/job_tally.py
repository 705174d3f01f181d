"""What a worker says of the jobs it finishes, on its log: at DEBUG one line per job (its id,
type, outcome and duration); at INFO, while jobs finish, one summary line a minute with the
counts of jobs completed, failed and retried, by type when there are few types.

The INFO path formats nothing per job: whether DEBUG is on is asked once, when the tally is made
(the worker's logging is set up before), and each job adds one to an integer."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

SUMMARY_EVERY_S = 60.0
BY_TYPE_UP_TO = 5  # more types than this: the summary gives the totals alone
_COMPLETED, _FAILED, _RETRIED = range(3)


class JobTally:
    """The counts of finished jobs since the last summary line, per type, and the DEBUG lines."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self.each = log.isEnabledFor(logging.DEBUG)  # one line per finished job
        self.counts: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

    def completed(self, job_id: str, job_type: str, seconds: float | None, *, approval: bool = False) -> None:
        self.counts[job_type][_COMPLETED] += 1
        if self.each:
            outcome = "completed, waits for approval" if approval else "completed"
            self.log.debug("job %s (%s) %s in %.3f s", job_id, job_type, outcome, seconds or 0.0)

    def failed(self, job_type: str, *, retried: bool) -> None:
        """A failed attempt, for good or to be retried (its line, at ERROR or INFO, is the outcomes')."""
        self.counts[job_type][_RETRIED if retried else _FAILED] += 1

    def cancelled(self, job_id: str, job_type: str, seconds: float | None) -> None:
        if self.each:
            self.log.debug("job %s (%s) cancelled in %.3f s", job_id, job_type, seconds or 0.0)

    def summary(self) -> str | None:
        """The summary of the counts since the last one, which it clears; None when no job finished."""
        counts, self.counts = self.counts, defaultdict(lambda: [0, 0, 0])
        if not counts:
            return None
        totals = [sum(c[i] for c in counts.values()) for i in range(3)]
        line = _counts_text(totals)
        if 1 < len(counts) <= BY_TYPE_UP_TO:
            line += " (" + "; ".join(f"{t}: {_counts_text(c)}" for t, c in sorted(counts.items())) + ")"
        elif len(counts) == 1:
            line += f" ({next(iter(counts))})"
        return f"in the last minute: {line}"

    async def run(self, stop: asyncio.Event, every_s: float = SUMMARY_EVERY_S) -> None:
        """Log the summary every `every_s` while jobs finish, until `stop` is set."""
        while not stop.is_set():
            try:
                async with asyncio.timeout(every_s):
                    await stop.wait()
            except TimeoutError:
                line = self.summary()
                if line is not None and self.log.isEnabledFor(logging.INFO):
                    self.log.info("%s", line)


def _counts_text(counts: list[int]) -> str:
    return f"{counts[_COMPLETED]:,} completed, {counts[_FAILED]:,} failed, {counts[_RETRIED]:,} retried"
