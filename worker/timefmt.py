"""Times as people read them in a table: "5s ago", "in 2m"."""

from __future__ import annotations

from datetime import UTC, datetime


def relative(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return ""
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            text = f"{int(seconds // size)}{unit}"
            break
    else:
        text = f"{int(seconds)}s"
    return f"in {text}" if future else f"{text} ago"
