"""Durations and times as the console and the CLI show them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobdesk.core.timefmt import relative, span, until


def test_span_reads_naturally_at_every_scale() -> None:
    assert [span(s) for s in (0.4243, 9.994, 9.999, 15.96, 59.94, 59.97, 187, 3599.4, 3599.6, 7500)] == [
        "0.42s", "9.99s", "10.0s", "16.0s", "59.9s", "1m00s", "3m07s", "59m59s", "1h00m", "2h05m"]


def test_relative_and_until() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert relative(now - timedelta(seconds=5), now) == "5s ago"
    assert relative(now + timedelta(minutes=2, seconds=5), now) == "in 2m"
    assert until(now + timedelta(minutes=4, seconds=30), now) == "in 4 min"
