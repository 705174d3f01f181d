"""The `type_controls` table (sql/029): job types paused across the fleet, and limits and rates an
operator set at run time, with the audit rows of each change and the NOTIFY that tells workers.

A pause is not a job transition: no job changes status. Workers keep the set of paused types
(`claim_controls`, read on the NOTIFY, and every poll interval while no NOTIFY is heard) and
leave those types out of their claims; the claim statements never read this table. Limits set here are put in force in
`type_limits` and `flow_limits`, where the claims read them (`jobdesk_apply_type_controls`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from jobdesk.core.limits import Rate
from jobdesk.core.rules import Actor
from jobdesk.core.type_controls import LIMIT_NAMES, SETTING_OF, LimitInForce, LimitValue, TypeControl
from jobdesk.store.listener import JOB_CHANGES_CHANNEL
from jobdesk.store.transitions import CONTROL_CHANNEL

# The control message that tells workers to read the paused types and the limits again.
TYPES_CHANGED = json.dumps({"types": "changed"})


def actor_name(actor: Actor) -> str:
    """Who acted, as `paused_by` and the waiting reason name them: a token's name, else the OS user."""
    return actor.name or actor.os_user or actor.source


async def _audit(conn: asyncpg.Connection, actor: Actor, action: str, job_type: str, reason: str | None) -> None:
    await conn.execute("INSERT INTO audit_log (os_user, source, actor, action, job_ids, reason, job_type) "
                       "VALUES ($1, $2, $3, $4, '{}', $5, $6)", actor.os_user, actor.source, actor_name(actor),
                       action, reason, job_type)


async def _announce(conn: asyncpg.Connection) -> None:
    """Tell every worker (they LISTEN on the control channel), and every watcher of jobs (`*`: the
    waiting reasons of the type's jobs changed, the console's detail pane reads its job again).
    Sent when the transaction commits."""
    await conn.execute("SELECT pg_notify($1, $2), pg_notify($3, '*')", CONTROL_CHANNEL, TYPES_CHANGED,
                       JOB_CHANGES_CHANNEL)


async def pause(conn: asyncpg.Connection, job_type: str, actor: Actor, reason: str | None) -> None:
    """Pause a type across the fleet (again: the newer actor, time and reason are kept)."""
    async with conn.transaction():
        await conn.execute("""
            INSERT INTO type_controls AS c (type, paused, paused_by, paused_at, reason) VALUES ($1, true, $2, now(), $3)
            ON CONFLICT (type) DO UPDATE SET paused = true, paused_by = EXCLUDED.paused_by, paused_at = now(),
                                             reason = EXCLUDED.reason, updated_at = now()""",
            job_type, actor_name(actor), reason)
        await _audit(conn, actor, "pause-type", job_type, reason)
        await _announce(conn)


async def resume(conn: asyncpg.Connection, job_type: str, actor: Actor) -> None:
    """Resume a paused type: claims take it again at once. A type not paused stays as it is."""
    async with conn.transaction():
        await conn.execute("""
            UPDATE type_controls SET paused = false, paused_by = NULL, paused_at = NULL, reason = NULL,
                                     updated_at = now()
             WHERE type = $1""", job_type)
        await _audit(conn, actor, "resume-type", job_type, None)
        await _announce(conn)


_LIMIT_COLUMNS = {"limit": ("max_running",), "user_limit": ("user_max_running",),
                  "rate": ("rate_max", "rate_period"), "user_rate": ("user_rate_max", "user_rate_period")}


def _column_values(name: str, value: LimitValue) -> list[object]:
    if isinstance(value, Rate):
        return [value.count, float(value.period_s)]
    return [value] if name in ("limit", "user_limit") else [None, None]


async def set_limits(conn: asyncpg.Connection, job_type: str, changes: Mapping[str, LimitValue], actor: Actor,
                     *, clear: bool = False) -> None:
    """Set (or with None clear) the operator's limits of a type, those named in `changes`; with
    `clear`, every one of them first. They are in force when this commits; workers that had not
    known the type was limited learn it from the NOTIFY, or within a poll interval."""
    sets: list[str] = []
    args: list[object] = [job_type, actor_name(actor)]
    todo: dict[str, LimitValue] = {**({n: None for n in _LIMIT_COLUMNS} if clear else {}), **changes}
    for name, value in todo.items():
        for column, v in zip(_LIMIT_COLUMNS[name], _column_values(name, value), strict=True):
            args.append(v)
            cast = "make_interval(secs => ${}::float8)" if column.endswith("period") else "${}::int"
            sets.append(f"{column} = {cast.format(len(args))}")
    said = ", ".join(f"{k}={_said(changes[k])}" for k in LIMIT_NAMES if k in changes)
    async with conn.transaction():
        await conn.execute("INSERT INTO type_controls (type) VALUES ($1) ON CONFLICT (type) DO NOTHING", job_type)
        await conn.execute(f"UPDATE type_controls SET {', '.join([*sets, 'limits_set_by = $2'])}, "
                           "limits_set_at = now(), updated_at = now() WHERE type = $1", *args)
        await conn.execute("SELECT jobdesk_apply_type_controls($1)", job_type)
        await _audit(conn, actor, "clear-type-limits" if clear and not changes else "set-type-limits", job_type,
                     ("cleared; " if clear else "") + said if said or clear else None)
        await _announce(conn)


def _said(value: LimitValue) -> str:
    return "none" if value is None else str(value)


@dataclass(frozen=True)
class ClaimControls:
    """What a worker's claims need: the paused types among its own, and a stamp that changes
    whenever an operator changes a type's controls (then the limits are read again)."""

    paused: frozenset[str]
    stamp: datetime | None


async def claim_controls(conn: asyncpg.Connection, types: Sequence[str]) -> ClaimControls:
    """One small read, on the NOTIFY (every poll interval without one): the paused types among `types`."""
    row = await conn.fetchrow("""
        SELECT COALESCE(array_agg(type) FILTER (WHERE paused AND type = ANY($1::text[])), '{}') AS paused,
               max(updated_at) AS stamp
          FROM type_controls""", list(types))
    return ClaimControls(frozenset(row["paused"]), row["stamp"])


async def paused_type(conn: asyncpg.Connection, job_type: str) -> asyncpg.Record | None:
    """The pause of a type (paused_by, paused_at, reason), or None when it is not paused."""
    return await conn.fetchrow("SELECT paused_by, paused_at, reason FROM type_controls WHERE type = $1 AND paused",
                               job_type)


def _source(operator_value: object, env_value: object, in_force: object, name: str, set_by: str | None) -> str | None:
    if in_force is None:
        return None
    if operator_value is not None:
        return f"database (set by {set_by or 'an operator'})"
    return f"env {SETTING_OF[name]}" if env_value is not None else "database"


def _rate_text(count: int | None, period_s: float | None) -> str | None:
    return None if count is None or period_s is None else str(Rate(count, int(period_s)))


async def list_types(conn: asyncpg.Connection, only: str | None = None) -> list[TypeControl]:
    """Every known type (served by a worker that registered, limited, or controlled), by name:
    paused or not, and each limit in force with where it came from."""
    rows = await conn.fetch("""
        WITH known AS (
            SELECT DISTINCT unnest(job_types)::text AS type FROM workers
            UNION SELECT type FROM type_limits UNION SELECT type FROM flow_limits UNION SELECT type FROM type_controls)
        SELECT k.type, COALESCE(c.paused, false) AS paused, c.paused_by, c.paused_at, c.reason, c.limits_set_by,
               c.max_running AS op_limit, c.rate_max AS op_rate, c.user_max_running AS op_user_limit,
               c.user_rate_max AS op_user_rate,
               l.max_running, l.env_max_running, f.rate_max, extract(epoch FROM f.rate_period)::float8 AS rate_s,
               f.env_rate_max, f.user_rate_max, extract(epoch FROM f.user_rate_period)::float8 AS user_rate_s,
               f.env_user_rate_max, f.user_max_running, f.env_user_max_running, COALESCE(f.fair_share, false) AS fair
          FROM known k
          LEFT JOIN type_controls c ON c.type = k.type
          LEFT JOIN type_limits l ON l.type = k.type
          LEFT JOIN flow_limits f ON f.type = k.type
         WHERE $1::text IS NULL OR k.type = $1
         ORDER BY k.type""", only)
    return [_control(r) for r in rows]


def _control(r: asyncpg.Record) -> TypeControl:
    by = r["limits_set_by"]
    limits = {
        "limit": LimitInForce(r["max_running"], _source(r["op_limit"], r["env_max_running"], r["max_running"],
                                                         "limit", by)),
        "rate": LimitInForce(rate := _rate_text(r["rate_max"], r["rate_s"]),
                             _source(r["op_rate"], r["env_rate_max"], rate, "rate", by)),
        "user_limit": LimitInForce(r["user_max_running"], _source(r["op_user_limit"], r["env_user_max_running"],
                                                                  r["user_max_running"], "user_limit", by)),
        "user_rate": LimitInForce(urate := _rate_text(r["user_rate_max"], r["user_rate_s"]),
                                  _source(r["op_user_rate"], r["env_user_rate_max"], urate, "user_rate", by)),
    }
    return TypeControl(r["type"], r["paused"], r["paused_by"], r["paused_at"], r["reason"], limits, r["fair"])
