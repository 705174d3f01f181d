"""The servers a DATABASE_URL names, each asked on its own: whether it answers, whether it is the
primary or a standby, and how far behind the primary each standby is (for `jobdesk doctor`).

A libpq URL may name several hosts (`postgresql://u@h1:5432,h2:5433/db?target_session_attrs=
read-write`); a process connects to whichever is the writable primary now. Here each host is
reached alone, whatever its role, so that a standby can be asked too.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.store.db import CONNECT_FAILURES, connect, hosts
from jobdesk.store.outage import reason

_ONE_HOST_DROPPED = {"target_session_attrs", "host", "port"}


def host_dsn(dsn: str, host: str) -> str:
    """`dsn` reaching only `host` ("name:port", as `hosts` gives it), whatever its role."""
    parts = urlsplit(dsn)
    name, _, port = host.rpartition(":")
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in _ONE_HOST_DROPPED]
    user = parts.netloc.rpartition("@")[0]
    if name.startswith("/"):  # a socket folder goes in the query
        netloc = f"{user}@" if user else ""
        query += [("host", name), ("port", port)]
    else:
        netloc = (f"{user}@" if user else "") + host
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, safe="/")))


# A host that cannot be reached: the driver's failures, or `connect`'s own error for them.
_UNREACHABLE: tuple[type[BaseException], ...] = (*CONNECT_FAILURES, DatabaseUnavailable)


@dataclass(frozen=True)
class HostState:
    """One host of the URL, as it answered."""

    host: str
    role: str | None  # "primary", "standby", or None when it did not answer
    error: str | None = None
    # A standby's delay: bytes of the primary's WAL it has not replayed, and seconds since the
    # last transaction it replayed was committed (0 when it has replayed everything).
    behind_bytes: int | None = None
    replay_delay_s: float | None = None
    wal_lsn: str | None = None  # the primary's current WAL position, or the standby's replayed one

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "role": self.role, "error": self.error, "behind_bytes": self.behind_bytes,
                "replay_delay_s": self.replay_delay_s}


@dataclass(frozen=True)
class Replica:
    """A standby streaming from the primary, as the primary's pg_stat_replication shows it."""

    name: str
    address: str
    state: str
    sync_state: str
    replay_lag_s: float | None
    behind_bytes: int | None

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "address": self.address, "state": self.state, "sync_state": self.sync_state,
                "replay_lag_s": self.replay_lag_s, "behind_bytes": self.behind_bytes}


_ROLE = """SELECT pg_is_in_recovery() AS standby,
       CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END::text AS lsn,
       CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END AS delay"""

_REPLICAS = """SELECT coalesce(application_name, '') AS name,
       coalesce(host(client_addr) || ':' || client_port, 'local socket') AS address, state,
       sync_state, extract(epoch FROM replay_lag) AS replay_lag_s,
       pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint AS behind_bytes
  FROM pg_stat_replication ORDER BY application_name, client_addr, client_port"""


async def probe(dsn: str, host: str, *, timeout: float = 5) -> HostState:
    """Ask one host of `dsn` its role (never raises for a host that does not answer)."""
    try:
        conn = await connect(host_dsn(dsn, host), timeout=timeout)
    except _UNREACHABLE as exc:
        text = reason(exc)
        return HostState(host, None, error=text.split(": ", 1)[1] if text.startswith("cannot connect") else text)
    try:
        row = await conn.fetchrow(_ROLE)
    except (asyncpg.PostgresError, *CONNECT_FAILURES) as exc:
        return HostState(host, None, error=reason(exc))
    finally:
        conn.terminate()
    if not row["standby"]:
        return HostState(host, "primary", wal_lsn=row["lsn"])
    return HostState(host, "standby", replay_delay_s=float(row["delay"] or 0), wal_lsn=row["lsn"])


async def behind(conn: asyncpg.Connection, primary_lsn: str, standby_lsn: str) -> int:
    """Bytes of WAL between two positions."""
    return int(await conn.fetchval("SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint", primary_lsn,
                                   standby_lsn))


async def replicas(conn: asyncpg.Connection) -> list[Replica]:
    """The standbys streaming from the primary `conn` is on."""
    return [Replica(r["name"], r["address"], r["state"], r["sync_state"],
                    None if r["replay_lag_s"] is None else float(r["replay_lag_s"]),
                    r["behind_bytes"]) for r in await conn.fetch(_REPLICAS)]


__all__ = ["HostState", "Replica", "behind", "host_dsn", "hosts", "probe", "replicas"]
