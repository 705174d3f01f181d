"""Durations as people write them: `90s`, `10m`, `12h`, `7d`, `1.5h`, or plain seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")


def parse_duration(text: str) -> float:
    """Seconds in `text`; ValueError with a readable message when it is not a duration."""
    match = _DURATION.match(str(text).lower())
    if not match:
        raise ValueError(f"{text!r} is not a duration; write it like 90s, 10m, 12h or 7d")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def format_duration(seconds: float) -> str:
    """The shortest exact way to write `seconds` (`90s`, `10m`, `12h`, `7d`)."""
    for unit in ("w", "d", "h", "m", "s"):
        size = _UNITS[unit]
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
