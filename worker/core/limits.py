"""Concurrency limits per job type: parsing `TYPE=N,TYPE=N`, and what a worker knows of its limits.

A global limit (JOB_TYPE_LIMITS) lives in `type_limits`, which every worker upserts from its
setting when it starts, so that workers without the setting respect it too. A per-worker cap
(`jobdesk worker --limit TYPE=N`) stays local to that worker. The claim of a limited type is
in `worker.store.transitions`; the table is kept by `worker.store.type_limits`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClaimLimits:
    """What a worker knows of the limits on its types: which have a global limit (the number
    itself is read, locked, by each claim) and its own caps."""

    fleet: frozenset[str] = frozenset()  # types with a row in type_limits
    local: Mapping[str, int] = field(default_factory=dict)  # this worker's caps

    def limited(self, types: Iterable[str]) -> list[str]:
        return [t for t in types if t in self.fleet or t in self.local]


def parse_type_limits(text: str) -> dict[str, int]:
    """`video.render=2,image.generate=4` as {type: N}; ValueError naming the bad part."""
    limits: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        limits.update(parse_type_limit(part))
    return limits


def parse_type_limit(part: str) -> dict[str, int]:
    """One `TYPE=N` (N at least 1)."""
    name, sep, count = part.rpartition("=")
    name = name.strip()
    if not sep or not name or len(name) > 255:
        raise ValueError(f"{part!r} is not TYPE=N, like video.render=2")
    try:
        value = int(count.strip())
    except ValueError:
        raise ValueError(f"{part!r}: N must be a whole number, like video.render=2") from None
    if value < 1:
        raise ValueError(f"{part!r}: N must be at least 1")
    return {name: value}
