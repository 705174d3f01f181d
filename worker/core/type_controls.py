"""A job type's controls at run time: paused or not, and the limits an operator set, with where
each limit in force came from. The checks of what an operator gives (a type name, a limit, a
rate) live here, so that the CLI, the HTTP API and the console refuse the same input with the
same words, before anything is written.

The four limits an operator may set have the names the doors use: `limit` (jobs of the type in
progress across the fleet, JOB_TYPE_LIMITS), `rate` (starts across the fleet, JOB_RATE_LIMITS),
`user_limit` (jobs in progress per user, JOB_USER_LIMITS) and `user_rate` (starts per user,
JOB_USER_RATE_LIMITS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from jobdesk.core.errors import InvalidJob
from jobdesk.core.json_value import JsonObject
from jobdesk.core.limits import PERIODS, Rate

TYPE_NAME_MAX = 255
LIMIT_NAMES = ("limit", "rate", "user_limit", "user_rate")
SETTING_OF = {"limit": "JOB_TYPE_LIMITS", "rate": "JOB_RATE_LIMITS", "user_limit": "JOB_USER_LIMITS",
              "user_rate": "JOB_USER_RATE_LIMITS"}
LimitValue = int | Rate | None
GLANCE_BUCKETS = 60  # 5-second buckets: the last 5 minutes
GLANCE_BUCKET_S = 5


def check_type_name(name: object) -> str:
    """The type name, or InvalidJob saying why it cannot be one (empty, too long, not text)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidJob("the type name is empty", field="type")
    if len(name) > TYPE_NAME_MAX:
        raise InvalidJob(f"the type name is {len(name)} characters long; at most {TYPE_NAME_MAX}", field="type")
    return name


def parse_limit(name: str, value: object) -> int | None:
    """A limit (`limit`, `user_limit`): a whole number, 0 or more; None clears it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise InvalidJob(f"{name}: {value!r} is not a whole number", field=name)
    if value < 0:
        raise InvalidJob(f"{name}: {value} is below 0; a limit is 0 or more (0 lets no job start)", field=name)
    return value


def parse_rate_value(name: str, value: object) -> Rate | None:
    """A rate (`rate`, `user_rate`): `N/s`, `N/m` or `N/h`, N at least 1; None clears it."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else ""
    count, slash, unit = text.partition("/")
    if not slash or unit.strip() not in PERIODS or not count.strip().isdigit():
        raise InvalidJob(f"{name}: {value!r} is not a rate like 10/s (N per s, m or h)", field=name)
    if int(count) < 1:
        raise InvalidJob(f"{name}: {value!r}: N must be at least 1", field=name)
    return Rate(int(count), PERIODS[unit.strip()])


def parse_limit_changes(changes: Mapping[str, object]) -> dict[str, LimitValue]:
    """The limits to set, by name: a value, or None to clear the operator's value (the setting's
    default is then in force). Names left out are not changed. InvalidJob for the first bad one."""
    unknown = [k for k in changes if k not in LIMIT_NAMES]
    if unknown:
        raise InvalidJob(f"{unknown[0]}: unknown limit; use {', '.join(LIMIT_NAMES)}", field=unknown[0])
    out: dict[str, LimitValue] = {}
    for key, value in changes.items():
        out[key] = parse_rate_value(key, value) if key.endswith("rate") else parse_limit(key, value)
    return out


@dataclass(frozen=True)
class LimitInForce:
    """One limit of a type as the claims obey it, and where it came from: `env JOB_TYPE_LIMITS`
    (a worker's setting) or `database (set by NAME)` (an operator); None when there is none."""

    value: int | str | None
    source: str | None


@dataclass(frozen=True)
class TypeActivity:
    """A type at a glance: its jobs running and queued now, and per 5 s of the last 5 minutes
    (oldest first) the jobs finished and the attempts failed, from the workers' rollup.
    `queued` counts the jobs ready to run, up to a cap; `queued_capped` says there are more."""

    running: int = 0
    queued: int = 0
    queued_capped: bool = False
    throughput: tuple[int, ...] = (0,) * GLANCE_BUCKETS
    failed: tuple[int, ...] = (0,) * GLANCE_BUCKETS


@dataclass(frozen=True)
class TypeControl:
    """A known job type: paused or not (by whom, when, why), and its limits in force."""

    type: str
    paused: bool = False
    paused_by: str | None = None
    paused_at: datetime | None = None
    reason: str | None = None
    limits: Mapping[str, LimitInForce] = field(default_factory=dict)  # by LIMIT_NAMES
    fair_share: bool = False
    activity: TypeActivity = TypeActivity()

    def limit(self, name: str) -> LimitInForce:
        return self.limits.get(name, LimitInForce(None, None))

    def to_json(self) -> JsonObject:
        """`type`, `paused`, `paused_by`, `paused_at`, `reason`, then each limit in force and its
        source (`limit`, `limit_source`, `rate`, `rate_source`...), `fair_share`, and the type at
        a glance: `running`, `queued`, `queued_capped`, `throughput` and `failed`."""
        out: JsonObject = {"type": self.type, "paused": self.paused, "paused_by": self.paused_by,
                           "paused_at": self.paused_at.isoformat() if self.paused_at else None,
                           "reason": self.reason}
        for name in LIMIT_NAMES:
            held = self.limit(name)
            out[name] = held.value
            out[f"{name}_source"] = held.source
        out["fair_share"] = self.fair_share
        a = self.activity
        out.update(running=a.running, queued=a.queued, queued_capped=a.queued_capped,
                   throughput=list(a.throughput), failed=list(a.failed))
        return out


def paused_text(paused_by: str | None, paused_at: datetime | None) -> str:
    """`type paused by alice at 2026-12-06 05:20:03 UTC`: a paused type's jobs' waiting reason."""
    when = f" at {paused_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if paused_at is not None else ""
    return f"type paused by {paused_by or 'an operator'}{when}"
