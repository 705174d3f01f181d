"""The `flow_limits` table: rate limits per type and per user, concurrency limits per user and
fair share, which every worker respects; what each limit holds back now; and why a job is held.

A worker upserts its settings here when it starts (parsing lives in `jobdesk.core.limits`). The
claim of a flow-controlled type is in `jobdesk.store.transitions.claim` and sql/022.
"""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg

from jobdesk.core.limits import FlowConfig, LimitUse, Rate, next_start_text

_READY = "status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL"


def _secs(rate: Rate | None) -> float | None:
    return None if rate is None else float(rate.period_s)


async def declare(conn: asyncpg.Connection, configs: Mapping[str, FlowConfig]) -> None:
    """Store these types' flow control (a worker's settings) as their `env_*` values and, where
    no operator set a value at run time (`type_controls`), as the one in force; the logs of
    starts and the fair-share turn are kept."""
    if not configs:
        return
    c = list(configs.values())
    await conn.execute("""
        INSERT INTO flow_limits AS f (type, rate_max, rate_period, user_rate_max, user_rate_period,
                                      user_max_running, fair_share, env_rate_max, env_rate_period,
                                      env_user_rate_max, env_user_rate_period, env_user_max_running)
        SELECT x.t, CASE WHEN o.rate_max IS NULL THEN x.rm ELSE o.rate_max END,
               CASE WHEN o.rate_max IS NULL THEN x.rp ELSE o.rate_period END,
               CASE WHEN o.user_rate_max IS NULL THEN x.urm ELSE o.user_rate_max END,
               CASE WHEN o.user_rate_max IS NULL THEN x.urp ELSE o.user_rate_period END,
               COALESCE(o.user_max_running, x.umr), x.fs, x.rm, x.rp, x.urm, x.urp, x.umr
          FROM (SELECT t, rm, make_interval(secs => rp) AS rp, urm, make_interval(secs => urp) AS urp, umr, fs
                  FROM unnest($1::text[], $2::int[], $3::float8[], $4::int[], $5::float8[], $6::int[], $7::bool[])
                       AS u(t, rm, rp, urm, urp, umr, fs)) x
          LEFT JOIN type_controls o ON o.type = x.t
        ON CONFLICT (type) DO UPDATE
           SET rate_max = EXCLUDED.rate_max, rate_period = EXCLUDED.rate_period,
               user_rate_max = EXCLUDED.user_rate_max, user_rate_period = EXCLUDED.user_rate_period,
               user_max_running = EXCLUDED.user_max_running, fair_share = EXCLUDED.fair_share,
               env_rate_max = EXCLUDED.env_rate_max, env_rate_period = EXCLUDED.env_rate_period,
               env_user_rate_max = EXCLUDED.env_user_rate_max, env_user_rate_period = EXCLUDED.env_user_rate_period,
               env_user_max_running = EXCLUDED.env_user_max_running, updated_at = now()
         WHERE (f.rate_max, f.rate_period, f.user_rate_max, f.user_rate_period, f.user_max_running, f.fair_share,
                f.env_rate_max, f.env_rate_period, f.env_user_rate_max, f.env_user_rate_period, f.env_user_max_running)
               IS DISTINCT FROM (EXCLUDED.rate_max, EXCLUDED.rate_period, EXCLUDED.user_rate_max,
                                 EXCLUDED.user_rate_period, EXCLUDED.user_max_running, EXCLUDED.fair_share,
                                 EXCLUDED.env_rate_max, EXCLUDED.env_rate_period, EXCLUDED.env_user_rate_max,
                                 EXCLUDED.env_user_rate_period, EXCLUDED.env_user_max_running)""",
        list(configs), [x.rate.count if x.rate else None for x in c], [_secs(x.rate) for x in c],
        [x.user_rate.count if x.user_rate else None for x in c], [_secs(x.user_rate) for x in c],
        [x.user_max_running for x in c], [x.fair_share for x in c])


def _rate(count: int | None, period_s: float | None) -> Rate | None:
    return None if count is None or period_s is None else Rate(count, int(period_s))


def _config(r: asyncpg.Record) -> FlowConfig:
    return FlowConfig(_rate(r["rate_max"], r["rate_s"]), _rate(r["user_rate_max"], r["user_rate_s"]),
                      r["user_max_running"], r["fair_share"])


_CONFIG_COLUMNS = """type, rate_max, extract(epoch FROM rate_period)::float8 AS rate_s, user_rate_max,
       extract(epoch FROM user_rate_period)::float8 AS user_rate_s, user_max_running, fair_share"""


async def flow_limits(conn: asyncpg.Connection, types: list[str] | None = None) -> dict[str, FlowConfig]:
    """The flow control stored, of these types (all when None)."""
    rows = await conn.fetch(f"SELECT {_CONFIG_COLUMNS} FROM flow_limits "
                            "WHERE $1::text[] IS NULL OR type = ANY($1::text[]) ORDER BY type", types)
    return {r["type"]: _config(r) for r in rows}


async def limit_uses(conn: asyncpg.Connection) -> list[LimitUse]:
    """Every limit on the claim (flow_limits and type_limits), with its use and what it holds back."""
    uses: list[LimitUse] = []
    for row in await conn.fetch(f"SELECT {_CONFIG_COLUMNS}, starts FROM flow_limits ORDER BY type"):
        uses.extend(await _flow_uses(conn, row))
    for row in await conn.fetch(f"""
            SELECT l.type, l.max_running,
                   (SELECT count(*) FROM jobs WHERE status = 'in_progress' AND type = l.type) AS running,
                   (SELECT count(*) FROM jobs WHERE type = l.type AND {_READY}) AS ready
              FROM type_limits l ORDER BY l.type"""):
        full = row["running"] >= row["max_running"]
        uses.append(LimitUse(row["type"], "type_running", f"{row['max_running']} running", f"{row['running']} running",
                             row["ready"] if full else 0))
    return uses


async def _flow_uses(conn: asyncpg.Connection, row: asyncpg.Record) -> list[LimitUse]:
    job_type, config = row["type"], _config(row)
    uses: list[LimitUse] = []
    ready = await conn.fetchval(f"SELECT count(*) FROM jobs WHERE type = $1 AND {_READY}", job_type)
    if config.rate is not None:
        r = await conn.fetchrow("""SELECT jobdesk_rate_room($1, $2, make_interval(secs => $3)) AS room,
                                          extract(epoch FROM jobdesk_rate_next($1, $2, make_interval(secs => $3))
                                                  - now())::float8 AS next_s""",
                                row["starts"], config.rate.count, float(config.rate.period_s))
        used = config.rate.count - r["room"]
        uses.append(LimitUse(job_type, "rate", str(config.rate), f"{used} in the last {config.rate.period_name}",
                             ready if r["room"] <= 0 else 0, r["next_s"]))
    if config.user_max_running is not None:
        r = await conn.fetchrow(f"""
            WITH running AS (SELECT COALESCE(user_id, 0) AS u, count(*) AS n FROM jobs
                              WHERE status = 'in_progress' AND type = $1 GROUP BY 1)
            SELECT (SELECT count(*) FROM running WHERE n >= $2) AS full_users,
                   (SELECT COALESCE(sum(n), 0) FROM running)::bigint AS running,
                   (SELECT count(*) FROM jobs WHERE type = $1 AND {_READY}
                       AND COALESCE(user_id, 0) IN (SELECT u FROM running WHERE n >= $2)) AS held""",
            job_type, config.user_max_running)
        uses.append(LimitUse(job_type, "user_running", f"{config.user_max_running} running per user",
                             f"{r['running']} running, {r['full_users']} user(s) at the limit", r["held"]))
    if config.user_rate is not None:
        r = await conn.fetchrow(f"""
            WITH spent AS (SELECT user_id AS u FROM flow_user_starts
                            WHERE type = $1 AND jobdesk_rate_room(starts, $2, make_interval(secs => $3)) <= 0)
            SELECT (SELECT count(*) FROM spent) AS full_users,
                   (SELECT count(*) FROM jobs WHERE type = $1 AND {_READY}
                       AND COALESCE(user_id, 0) IN (SELECT u FROM spent)) AS held""",
            job_type, config.user_rate.count, float(config.user_rate.period_s))
        uses.append(LimitUse(job_type, "user_rate", f"{config.user_rate} per user",
                             f"{r['full_users']} user(s) at the limit", r["held"]))
    if config.fair_share:
        users = await conn.fetchval("SELECT cardinality(jobdesk_ready_users($1, jobdesk_ready_priority($1, NULL)))",
                                    job_type)
        uses.append(LimitUse(job_type, "fair_share", "fair share", f"{users} user(s) with jobs waiting", 0))
    return uses


async def flow_reason(conn: asyncpg.Connection, job_type: str, user_id: int | None,
                      priority: int) -> tuple[str, str] | None:
    """Why flow control holds a runnable job of this type and user back: (kind, sentence), or
    None when it does not. Kinds: rate_limit, user_rate_limit, user_limit, fair_share."""
    row = await conn.fetchrow(f"SELECT {_CONFIG_COLUMNS}, starts FROM flow_limits WHERE type = $1", job_type)
    if row is None:
        return None
    config, uid = _config(row), user_id if user_id is not None else 0
    if config.rate is not None:
        r = await conn.fetchrow("""SELECT jobdesk_rate_room($1, $2, make_interval(secs => $3)) AS room,
                                          extract(epoch FROM jobdesk_rate_next($1, $2, make_interval(secs => $3))
                                                  - now())::float8 AS next_s""",
                                row["starts"], config.rate.count, float(config.rate.period_s))
        if r["room"] <= 0:
            when = next_start_text(r["next_s"])
            return "rate_limit", f"rate limit of {job_type} ({config.rate}) reached, next start {when}"
    if config.user_max_running is not None:
        running = await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'in_progress' AND type = $1 "
                                      "AND COALESCE(user_id, 0) = $2", job_type, uid)
        if running >= config.user_max_running:
            return "user_limit", f"user {uid} has {running} of {config.user_max_running} {job_type} running"
    if config.user_rate is not None:
        r = await conn.fetchrow("""
            SELECT jobdesk_rate_room(starts, $3, make_interval(secs => $4)) AS room,
                   extract(epoch FROM jobdesk_rate_next(starts, $3, make_interval(secs => $4)) - now())::float8
                       AS next_s
              FROM flow_user_starts WHERE type = $1 AND user_id = $2""",
            job_type, uid, config.user_rate.count, float(config.user_rate.period_s))
        if r is not None and r["room"] <= 0:
            return ("user_rate_limit", f"rate limit of {job_type} per user ({config.user_rate}) reached for user {uid},"
                    f" next start {next_start_text(r['next_s'])}")
    if config.fair_share:
        others = await conn.fetchval("SELECT count(*) FROM unnest(jobdesk_ready_users($1, $2)) u WHERE u <> $3",
                                     job_type, priority, uid)
        if others:
            noun = "user's job goes" if others == 1 else "users' jobs go"
            return "fair_share", f"fair share: {others} other {noun} first"
    return None
