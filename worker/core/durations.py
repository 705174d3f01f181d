"""Durations as people write them in settings and on the command line: `90s`, `30m`, `12h`,
`7d`, `2w`, plain seconds, or (where it means "keep") `forever`."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
FOREVER = "forever"


def parse_duration(text: str) -> float | None:
    """Seconds, or None for `forever`; ValueError for anything else (a unit is required)."""
    if text.strip().lower() == FOREVER:
        return None
    if text.strip()[-1:].isdigit():
        raise ValueError(f"{text!r} has no unit; write it like 90s, 30m, 12h or 7d, or 'forever'")
    return parse_seconds(text)


def parse_seconds(text: str) -> float:
    """Seconds in a duration that has to end (`forever` is refused); ValueError otherwise."""
    match = _DURATION.match(str(text).lower())
    if not match:
        raise ValueError(f"{text!r} is not a duration; write it like 90s, 30m, 12h or 7d")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def format_duration(seconds: float | None) -> str:
    """The shortest exact form of `seconds` (`forever` for None)."""
    if seconds is None:
        return FOREVER
    for unit in ("w", "d", "h", "m"):
        if seconds >= _UNITS[unit] and seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"
