"""Concurrency limits per job type: parsing `TYPE=N,TYPE=N`, and what a worker knows of its limits.

A global limit (JOB_TYPE_LIMITS) lives in `type_limits`, which every worker upserts from its
setting when it starts, so that workers without the setting respect it too. A per-worker cap
(`jobdesk worker --limit TYPE=N`) stays local to that worker. The claim of a limited type is
in `jobdesk.store.transitions`; the table is kept by `jobdesk.store.type_limits`.

Flow control (JOB_RATE_LIMITS, JOB_USER_RATE_LIMITS, JOB_USER_LIMITS, JOB_FAIR_SHARE) lives in
`flow_limits` the same way, kept by `jobdesk.store.flow_limits`; `FlowConfig` is one type's row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from jobdesk.core.durations import parse_seconds
from jobdesk.core.sizes import parse_size

V = TypeVar("V")


@dataclass(frozen=True)
class ClaimLimits:
    """What a worker knows of the limits on its types: which have a global limit (the number
    itself is read, locked, by each claim) and its own caps."""

    fleet: frozenset[str] = frozenset()  # types with a row in type_limits
    local: Mapping[str, int] = field(default_factory=dict)  # this worker's caps
    flow: frozenset[str] = frozenset()  # types with a row in flow_limits (rates, users, fair share)

    def limited(self, types: Iterable[str]) -> list[str]:
        return [t for t in types if t in self.fleet or t in self.local or t in self.flow]


PERIODS = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class Rate:
    """At most `count` starts in any `period_s` seconds."""

    count: int
    period_s: int

    def __str__(self) -> str:
        unit = next(u for u, s in PERIODS.items() if s == self.period_s)
        return f"{self.count}/{unit}"

    @property
    def period_name(self) -> str:
        """`second`, `minute` or `hour`."""
        return {1: "second", 60: "minute", 3600: "hour"}[self.period_s]


@dataclass(frozen=True)
class FlowConfig:
    """The flow control of one type, as stored in its `flow_limits` row."""

    rate: Rate | None = None  # starts across the fleet
    user_rate: Rate | None = None  # starts per user
    user_max_running: int | None = None  # jobs in progress per user
    fair_share: bool = False  # round-robin across users


@dataclass(frozen=True)
class LimitUse:
    """One limit, its use now and how many runnable jobs it holds back."""

    type: str
    kind: str  # rate, user_rate, user_running, type_running, fair_share
    limit: str  # `10/s`, `1 per user`, `fair share`...
    in_use: str  # `7 in the last second`, `3 running, 2 user(s) at the limit`...
    held: int  # runnable jobs of the type that this limit keeps from starting now
    next_start_s: float | None = None  # for a full rate: seconds until the next start


def next_start_text(seconds: float | None) -> str:
    """`in 80 ms`, `in 2.5 s`."""
    if seconds is None:
        return "soon"
    return f"in {max(seconds, 0) * 1000:.0f} ms" if seconds < 1 else f"in {seconds:.1f} s"


def describe(config: FlowConfig) -> str:
    """`rate 10/s, 2/s per user, 1 running per user, fair share`."""
    parts = [f"rate {config.rate}" if config.rate else "", f"{config.user_rate} per user" if config.user_rate else "",
             f"{config.user_max_running} running per user" if config.user_max_running else "",
             "fair share" if config.fair_share else ""]
    return ", ".join(p for p in parts if p) or "none"


def _parse_per_type(text: str, parse_part: Callable[[str], dict[str, V]]) -> dict[str, V]:
    """`TYPE=VALUE,TYPE=VALUE` as {type: value}, each part read by `parse_part`; empty parts are
    passed over and a type named twice keeps its last value."""
    values: dict[str, V] = {}
    for part in (p.strip() for p in text.split(",")):
        if part:
            values.update(parse_part(part))
    return values


def _split_part(part: str, form: str, example: str) -> tuple[str, str]:
    """`TYPE=VALUE` as (type, value); ValueError naming `form` (`TYPE=N`) and an example unless
    the type is 1 to 255 characters."""
    name, sep, value = part.rpartition("=")
    name = name.strip()
    if not sep or not name or len(name) > 255:
        raise ValueError(f"{part!r} is not {form}, like {example}")
    return name, value


def _at_least_one(part: str, text: str, example: str) -> int:
    """The N of a part: a whole number of at least 1."""
    try:
        n = int(text.strip())
    except ValueError:
        raise ValueError(f"{part!r}: N must be a whole number, like {example}") from None
    if n < 1:
        raise ValueError(f"{part!r}: N must be at least 1")
    return n


def parse_rates(text: str) -> dict[str, Rate]:
    """`image.generate=10/s,video.render=100/m` as {type: Rate}; ValueError naming the bad part."""
    return _parse_per_type(text, parse_rate)


def parse_rate(part: str) -> dict[str, Rate]:
    """One `TYPE=N/P`, N at least 1 and P one of s, m, h."""
    form, example = "TYPE=N/PERIOD", "image.generate=10/s"
    name, value = _split_part(part, form, example)
    count, slash, unit = value.strip().partition("/")
    if not slash:
        raise ValueError(f"{part!r} is not {form}, like {example}")
    if unit.strip() not in PERIODS:
        raise ValueError(f"{part!r}: the period must be s, m or h, like {example}")
    return {name: Rate(_at_least_one(part, count, example), PERIODS[unit.strip()])}


def parse_type_names(text: str) -> list[str]:
    """`video.render,image.generate` or `*` (every type a worker serves) as a list of names."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    if "*" in names and len(names) > 1:
        raise ValueError("'*' stands for every type and goes alone")
    if any(len(n) > 255 for n in names):
        raise ValueError("a type name is at most 255 characters")
    return names


def flow_configs(types: Iterable[str], rates: Mapping[str, Rate], user_rates: Mapping[str, Rate],
                 user_limits: Mapping[str, int], fair_share: Iterable[str]) -> dict[str, FlowConfig]:
    """The flow control the settings give, by type: the types they name, and with `*` in
    `fair_share`, every one of `types` (a worker's own)."""
    fair = set(fair_share)
    fair_types = set(types) if "*" in fair else fair
    named = set(rates) | set(user_rates) | set(user_limits) | fair_types
    return {t: FlowConfig(rates.get(t), user_rates.get(t), user_limits.get(t), t in fair_types) for t in sorted(named)}


def parse_type_limits(text: str) -> dict[str, int]:
    """`video.render=2,image.generate=4` as {type: N}; ValueError naming the bad part."""
    return _parse_per_type(text, parse_type_limit)


def parse_type_limit(part: str) -> dict[str, int]:
    """One `TYPE=N` (N at least 1)."""
    name, count = _split_part(part, "TYPE=N", "video.render=2")
    return {name: _at_least_one(part, count, "video.render=2")}


def parse_type_timeouts(text: str) -> dict[str, float]:
    """`video.render=600,email.send=30` as {type: seconds}; ValueError naming the bad part.
    A value may carry a unit as other durations do: `video.render=10m`."""
    return _parse_per_type(text, parse_type_timeout)


def parse_type_timeout(part: str) -> dict[str, float]:
    """One `TYPE=SECONDS` (more than 0)."""
    name, value = _split_part(part, "TYPE=SECONDS", "video.render=600")
    try:
        seconds = parse_seconds(value)
    except ValueError:
        raise ValueError(f"{part!r}: SECONDS must be a number, like video.render=600 or video.render=10m") from None
    if seconds <= 0:
        raise ValueError(f"{part!r}: SECONDS must be more than 0")
    return {name: seconds}


def parse_type_sizes(text: str) -> dict[str, int]:
    """`video.render=2GB,image.thumb=256MB` as {type: bytes} (see jobdesk.core.sizes);
    ValueError naming the bad part."""
    return _parse_per_type(text, parse_type_size)


def parse_type_size(part: str) -> dict[str, int]:
    """One `TYPE=SIZE` (more than 0 bytes)."""
    name, value = _split_part(part, "TYPE=SIZE", "video.render=2GB")
    try:
        return {name: parse_size(value)}
    except ValueError as exc:
        raise ValueError(f"{part!r}: {exc}") from None
