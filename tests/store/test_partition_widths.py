"""How wide the completed jobs' partitions are made: a handful of them, whatever the retention."""

from __future__ import annotations

from jobdesk.store.partitions import FOREVER_WIDTH_S, MAX_WIDTH_S, MIN_WIDTH_S, width_for


def test_a_partition_is_a_quarter_of_the_retention_within_a_minute_and_a_week() -> None:
    assert width_for(7 * 86400) == 7 * 86400 / 4
    assert width_for(60) == MIN_WIDTH_S == 60
    assert width_for(365 * 86400) == MAX_WIDTH_S == 7 * 86400
    assert width_for(None) == FOREVER_WIDTH_S == 30 * 86400
