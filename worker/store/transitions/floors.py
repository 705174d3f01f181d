"""Walk floors: where a worker's next walk of each type's runnable jobs starts.

A claim walks `jobs_ready_idx` (by type, priority descending, seq) from its first entry. Each
job claimed leaves its entry behind until vacuum, or the entry's own cleanup, removes it; while
a transaction holds vacuum back, neither may, and every walk steps over all the entries of the
jobs claimed since. A floor is the (priority, seq) of the first job the worker's last walk of
the type claimed: every runnable job before it in walk order was claimed, or held by another
claim, when the walk ran, so the next walk may start there and skip the dead entries.

A job can come back below a floor: a retry or a scheduled job whose time came, a job taken back
from a lost worker, a dependant released, an approval, a durable job woken, a job put back.
Each of those says so (a NOTIFY on `jobdesk_new_jobs`, or the worker's own wake-up), and the
worker then clears every floor (`clear`): the notice names no type. New jobs say how low they
go, '<highest priority>:<lowest seq>' of an insert statement's rows (sql/031), and the worker
lowers its floors to that (`lower`): a steady trickle of new jobs leaves the floors where they
are, and a job of an enqueue that commits after later jobs were claimed lowers them to its seq.
Behind a pooler, where nothing is heard, a worker clears the floors before every round, and
every worker clears them at least once a second, for what no news covers (a row skipped because
another transaction held it, and that stayed queued).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import asyncpg

NO_FLOOR = (2**31 - 1, 0)  # from the highest priority on: the whole walk


def notice_floor(payload: str) -> tuple[int, int] | None:
    """How low the jobs of a new-jobs notice go, '<priority>:<seq>'; None when it does not say
    (any other news: the floors are cleared)."""
    priority, sep, seq = payload.partition(":")
    try:
        return (int(priority), int(seq)) if sep else None
    except ValueError:
        return None


def before_in_walk(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether `a` comes before `b` in walk order (priority descending, then seq)."""
    return (-a[0], a[1]) < (-b[0], b[1])


class WalkFloors:
    """The floors of one worker's walks, by type, and when they were last cleared."""

    def __init__(self) -> None:
        self.at: dict[str, tuple[int, int]] = {}
        self.cleared_at = time.monotonic()
        self.clears = 0  # how many times they were cleared while some were set

    def clear(self) -> None:
        """Walk every type from its first entry again."""
        if self.at:
            self.clears += 1
            self.at.clear()
        self.cleared_at = time.monotonic()

    def args(self, types: Sequence[str]) -> tuple[list[int], list[int]]:
        """The floors' priorities and seqs, in the order of `types`, as the claim reads them."""
        keys = [self.at.get(t, NO_FLOOR) for t in types]
        return [k[0] for k in keys], [k[1] for k in keys]

    def lower(self, key: tuple[int, int]) -> None:
        """Bring every floor down to `key`, where new jobs may be."""
        for job_type, at in self.at.items():
            if before_in_walk(key, at):
                self.at[job_type] = key

    def advance(self, claimed: Sequence[asyncpg.Record]) -> None:
        """Raise each type's floor to the first job of it the walk claimed (walk order)."""
        first: dict[str, tuple[int, int]] = {}
        for row in claimed:
            key = (row["priority"], row["seq"])
            known = first.get(row["type"])
            if known is None or before_in_walk(key, known):
                first[row["type"]] = key
        self.at.update(first)


class LaneFloors:
    """The floors of a worker's claim pumps, one WalkFloors per lane (transitions.Lane). A lane's
    walk reads only its lane's jobs, so its floor says that every runnable job of the lane before
    it was claimed or held, and the lane's next walk starts there. A walk of every lane (a pump
    claiming alone, see pump.Kicks.alone) starts at the earliest of the lanes' floors, and the
    first job it claims of a type raises each lane's floor of it to there. News (a job back below
    the floors) clears or lowers them all."""

    def __init__(self, lanes: int) -> None:
        self.lanes = [WalkFloors() for _ in range(lanes)]

    def of(self, lane: tuple[int, int] | None) -> WalkFloors:
        """The floors a round in `lane` walks from: the lane's own, or for every lane, a copy of
        the earliest of theirs (`settle` brings what it claims back to the lanes)."""
        if lane is not None:
            return self.lanes[lane[0]]
        walk = WalkFloors()
        walk.at = self.at
        return walk

    def settle(self, walked: WalkFloors) -> None:
        """Raise each lane's floors to those of a walk of every lane, where they are below."""
        for floors in self.lanes:
            for job_type, key in walked.at.items():
                at = floors.at.get(job_type)
                if at is None or before_in_walk(at, key):
                    floors.at[job_type] = key

    @property
    def at(self) -> dict[str, tuple[int, int]]:
        """Per type, the earliest of the lanes' floors (none unless every lane has one)."""
        first, *others = self.lanes
        out = {}
        for job_type, key in first.at.items():
            keys = [key, *(floors.at[job_type] for floors in others if job_type in floors.at)]
            if len(keys) == len(self.lanes):
                out[job_type] = min(keys, key=lambda k: (-k[0], k[1]))
        return out

    @property
    def clears(self) -> int:
        return sum(floors.clears for floors in self.lanes)

    @property
    def cleared_at(self) -> float:
        return min(floors.cleared_at for floors in self.lanes)

    def clear(self) -> None:
        for floors in self.lanes:
            floors.clear()

    def lower(self, key: tuple[int, int]) -> None:
        for floors in self.lanes:
            floors.lower(key)
