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


def span(seconds: float) -> str:
    """A duration: "0.42s", "26.3s", "3m07s", "2h05m" (the bounds are where rounding would
    carry into the next form: 59.97 s is "1m00s", not "60.0s")."""
    if seconds < 9.995:
        return f"{seconds:.2f}s"
    if seconds < 59.95:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def until(when: datetime, now: datetime | None = None) -> str:
    """How long until a future time, in words: "in 40 s", "in 4 min", "in 3 h", "in 2 d"."""
    seconds = max((when - (now or datetime.now(UTC))).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"in {int(seconds // size)} {unit}"
    return f"in {int(seconds)} s"
