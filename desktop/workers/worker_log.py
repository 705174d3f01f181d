"""Lines of a worker's log, with the level each belongs to.

`jobdesk worker` logs as `%(asctime)s %(levelname)-7s %(name)s: %(message)s`. A line that does not
start a record (a traceback, a processor's print) belongs to the record before it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING, "ERROR": logging.ERROR,
          "CRITICAL": logging.CRITICAL}
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")


def record_level(text: str) -> int | None:
    """The level of a line that starts a log record; None for a continuation line."""
    match = _RECORD.match(text)
    return LEVELS[match.group(1)] if match else None


@dataclass(frozen=True)
class LogLine:
    level: int
    text: str


class LineSplitter:
    """Turns chunks of process output into LogLines, keeping a partial last line for later."""

    def __init__(self) -> None:
        self._partial = ""
        self._level = logging.INFO

    def feed(self, chunk: str) -> list[LogLine]:
        text = self._partial + chunk
        *complete, self._partial = text.split("\n")
        return [self._line(raw.rstrip("\r")) for raw in complete]

    def flush(self) -> list[LogLine]:
        """The partial last line, if any (the process has exited)."""
        rest, self._partial = self._partial, ""
        return [self._line(rest)] if rest else []

    def _line(self, text: str) -> LogLine:
        level = record_level(text)
        if level is not None:
            self._level = level
        return LogLine(self._level, text)
