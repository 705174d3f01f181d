"""`jobdesk doctor`'s findings: each host of DATABASE_URL and its role, each standby's lag, the
read replica (DATABASE_READ_URL) and its lag, the schema, the workers; and what is wrong, if
anything, in one line per problem."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.store import cluster, fleet
from jobdesk.store.cluster import HostState, Replica
from jobdesk.store.db import CONNECT_FAILURES, Database, connect
from jobdesk.store.migrations import available_migrations, pending_migrations
from jobdesk.store.outage import reason

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

# A host that cannot be reached: the driver's failures, or `connect`'s own error for them.
_UNREACHABLE: tuple[type[BaseException], ...] = (*CONNECT_FAILURES, DatabaseUnavailable)


@dataclass
class Diagnosis:
    hosts: list[HostState]
    replicas: list[Replica] = field(default_factory=list)
    read_hosts: list[HostState] = field(default_factory=list)  # the hosts of DATABASE_READ_URL, if set
    schema_version: int | None = None  # the newest migration applied; None when not read
    pending: list[str] = field(default_factory=list)  # migrations not applied yet
    workers_alive: int | None = None
    workers_lost: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def primary(self) -> HostState | None:
        return next((h for h in self.hosts if h.role == "primary"), None)

    def to_json(self) -> dict[str, object]:
        return {"hosts": [h.to_json() for h in self.hosts], "replicas": [r.to_json() for r in self.replicas],
                "read_replica": [h.to_json() for h in self.read_hosts],
                "schema_version": self.schema_version, "pending_migrations": self.pending,
                "workers_alive": self.workers_alive, "workers_lost": self.workers_lost, "problems": self.problems}


async def diagnose(database: Database, settings: Settings, *, timeout: float = 5) -> Diagnosis:
    """Ask every host of the database's URL, then the primary for its standbys, schema and workers."""
    found = await asyncio.gather(*(cluster.probe(database.dsn, h, timeout=timeout)
                                   for h in cluster.hosts(database.dsn)))
    read_url = database.read_url or ""
    read_hosts = await asyncio.gather(*(cluster.probe(read_url, h, timeout=timeout)
                                        for h in (cluster.hosts(read_url) if read_url else [])))
    primaries = [h for h in found if h.role == "primary"]
    out = Diagnosis(list(found), read_hosts=list(read_hosts))
    for host in out.read_hosts:
        if host.role is None:
            out.problems.append(f"the read replica {host.host} (DATABASE_READ_URL) does not answer: {host.error}")
    if not primaries:
        out.problems.append("no host accepts writes: every process waits for a primary")
        return out
    if len(primaries) > 1:
        out.problems.append(f"{len(primaries)} hosts accept writes ({', '.join(h.host for h in primaries)}): "
                            "an old primary still runs beside the promoted one")
    primary = primaries[0]
    try:
        conn = await connect(cluster.host_dsn(database.dsn, primary.host), timeout=timeout)
    except _UNREACHABLE as exc:
        out.problems.append(f"the primary {primary.host} stopped answering: {reason(exc)}")
        return out
    try:
        out.hosts = [await _with_distance(conn, primary, h) for h in found]
        out.read_hosts = [await _with_distance(conn, primary, h) for h in out.read_hosts]
        out.replicas = await cluster.replicas(conn)
        await _read_schema_and_workers(conn, settings, out)
    finally:
        await conn.close()
    for host in out.hosts:
        if host.role is None:
            out.problems.append(f"{host.host} does not answer: {host.error}")
    return out


async def _with_distance(conn: asyncpg.Connection, primary: HostState, host: HostState) -> HostState:
    if host.role != "standby" or primary.wal_lsn is None or host.wal_lsn is None:
        return host
    return HostState(host.host, host.role, behind_bytes=max(0, await cluster.behind(conn, primary.wal_lsn,
                                                                                     host.wal_lsn)),
                     replay_delay_s=host.replay_delay_s, wal_lsn=host.wal_lsn)


async def _read_schema_and_workers(conn: asyncpg.Connection, settings: Settings, out: Diagnosis) -> None:
    try:
        pending = await pending_migrations(conn)
    except asyncpg.UndefinedTableError:
        pending = available_migrations()
    out.pending = [f"{m.version:03d}_{m.name}" for m in pending]
    applied = [m.version for m in available_migrations() if m not in pending]
    out.schema_version = max(applied) if applied else None
    if pending:
        out.problems.append(f"{len(pending)} migration(s) not applied: run `jobdesk migrate`")
        if not applied:
            return
    workers = await fleet.list_workers(conn, include_stopped=False)
    lost = [w for w in workers if w.is_lost(settings.JOB_LEASE_TIMEOUT)]
    out.workers_alive, out.workers_lost = len(workers) - len(lost), len(lost)
