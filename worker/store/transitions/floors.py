"""Walk floors: where a worker's next walk of each type's runnable jobs starts.

A claim walks `jobs_ready_idx` (by type, priority descending, seq) from its first entry. Each
job claimed leaves its entry behind until vacuum, or the entry's own cleanup, removes it; while
a transaction holds vacuum back, neither may, and every walk steps over all the entries of the
jobs claimed since. A floor is the (priority, seq) of the first job the worker's last walk of
the type claimed: every runnable job before it in walk order was claimed, or held by another
claim, when the walk ran, so the next walk may start there and skip the dead entries.

A job can come back below a floor: a retry or a scheduled job whose time came, a job taken back
from a lost worker, a dependant released, an approval, a durable job woken, a job put back,
an enqueue that commits after jobs with higher seqs were claimed. Each of those says so (a
NOTIFY on `jobdesk_new_jobs`, or the worker's own wake-up), and the worker then clears every
floor (`clear`): the payload names no type. The floors hold only between such news; behind a
pooler, where nothing is heard, a worker clears them before every round, and every worker
clears them at least once a second, for what no news covers (a row skipped because another
transaction held it, and that stayed queued).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import asyncpg

NO_FLOOR = (2**31 - 1, 0)  # from the highest priority on: the whole walk


class WalkFloors:
    """The floors of one worker's walks, by type, and when they were last cleared."""

    def __init__(self) -> None:
        self.at: dict[str, tuple[int, int]] = {}
        self.cleared_at = time.monotonic()

    def clear(self) -> None:
        """Walk every type from its first entry again."""
        self.at.clear()
        self.cleared_at = time.monotonic()

    def args(self, types: Sequence[str]) -> tuple[list[int], list[int]]:
        """The floors' priorities and seqs, in the order of `types`, as the claim reads them."""
        keys = [self.at.get(t, NO_FLOOR) for t in types]
        return [k[0] for k in keys], [k[1] for k in keys]

    def advance(self, claimed: Sequence[asyncpg.Record]) -> None:
        """Raise each type's floor to the first job of it the walk claimed (walk order)."""
        first: dict[str, tuple[int, int]] = {}
        for row in claimed:
            key = (row["priority"], row["seq"])
            known = first.get(row["type"])
            if known is None or (-key[0], key[1]) < (-known[0], known[1]):
                first[row["type"]] = key
        self.at.update(first)
