"""Connections to PostgreSQL: which database, and asyncpg pools with jobdesk's codecs."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from jobdesk.core.errors import DatabaseUnavailable
from jobdesk.store.array_codecs import declare_builtin_arrays
from jobdesk.store.fair_pool import FairPool

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

log = logging.getLogger(__name__)

# Errors that mean "the database is not there (right now)", as opposed to a bad query.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ConnectionError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.InternalClientError,
)


# Failures a front door expects and shows as a message: the database is away, refused a query
# (a timeout, a missing right) or is not there yet. Anything else is a bug.
EXPECTED_DB_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, asyncpg.PostgresError, TimeoutError)

# What a failed attempt to connect raises: the database away or refusing, an unknown host, a bad URL.
CONNECT_FAILURES: tuple[type[BaseException], ...] = (*EXPECTED_DB_ERRORS, socket.gaierror, ValueError)


# Whether a URL goes through a pooler in transaction mode (PgBouncer's `pool_mode = transaction`),
# where every transaction may run on another server session. A pooler is found by itself: the
# first connection to a URL compares the backend id that the handshake gave (a pooler makes up
# its own, for cancel requests) with the one PostgreSQL reports. `?pgbouncer=true` or `=false` on
# the URL says it outright, and nothing is probed.
POOLER_OPTION = "pgbouncer"
_TRUE = {"true", "1", "yes", "on"}
_probed: dict[str, bool] = {}  # URL without the option -> whether a pooler answered it
_probing: dict[str, asyncio.Future[bool]] = {}  # URL -> the probe under way, shared by its callers


def split_pooler(dsn: str) -> tuple[str, bool | None]:
    """The DSN without jobdesk's pooler option (no driver knows it), and the option's value:
    True or False when given, None when not."""
    parts = urlsplit(dsn)
    if POOLER_OPTION not in parts.query:
        return dsn, None
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    given = [v.lower() in _TRUE for k, v in pairs if k == POOLER_OPTION]
    query = urlencode([(k, v) for k, v in pairs if k != POOLER_OPTION], safe="/")
    return urlunsplit(parts._replace(query=query)), (given[-1] if given else None)


def is_pooled(dsn: str) -> bool:
    """Whether a DSN goes through a transaction pooler, so that nothing may outlive a
    transaction: as the URL says, or as its first connection found (`know_pooler`)."""
    clean, given = split_pooler(dsn)
    return given if given is not None else _probed.get(clean, False)


def known_direct(dsn: str) -> None:
    """Record that this DSN reaches PostgreSQL itself (the embedded server): nothing to probe."""
    _probed[split_pooler(dsn)[0]] = False


async def know_pooler(dsn: str, timeout: float = 10) -> bool:
    """`is_pooled`, finding out with one short connection the first time a URL that does not
    say is used. That connection sends no startup parameter and prepares no named statement,
    which a pooler would refuse or lose. Callers asking at once (a worker checks the schema
    while its pool opens) share one probe. DatabaseUnavailable when it cannot connect."""
    clean, given = split_pooler(dsn)
    if given is not None:
        return given
    if clean in _probed:
        return _probed[clean]
    probe = _probing.get(clean)
    if probe is None or probe.get_loop() is not asyncio.get_running_loop():
        probe = _probing[clean] = asyncio.ensure_future(_probe_pooler(dsn, clean, timeout))
        probe.add_done_callback(lambda done: _probing.pop(clean) if _probing.get(clean) is done else None)
    return await asyncio.shield(probe)  # a caller cancelled leaves the probe to the others


async def _probe_pooler(dsn: str, clean: str, timeout: float) -> bool:
    try:
        conn = await asyncpg.connect(clean, timeout=timeout, statement_cache_size=0)
        try:
            pooled = await conn.fetchval("SELECT pg_backend_pid()") != conn.get_server_pid()
        finally:
            await conn.close()
    except CONNECT_FAILURES as exc:
        raise _unavailable(dsn, exc) from exc
    if pooled:
        log.info("%s answers through a connection pooler: nothing is kept in a session between "
                 "transactions", describe(clean))
    _probed[clean] = pooled
    return pooled


def is_starting_up(exc: BaseException) -> bool:
    """Whether a failed connection met a server that is starting or shutting down."""
    return isinstance(exc.__cause__ or exc, asyncpg.CannotConnectNowError)


def describe(dsn: str) -> str:
    """Where a DSN points, in words: database and host(s), or the socket folder. A libpq URL may
    name several hosts (`postgresql://u@h1:5432,h2:5433/db`); each is listed."""
    return f"{database_name(dsn)} on {','.join(hosts(dsn))}"


def database_name(dsn: str) -> str:
    parts = urlsplit(dsn)
    return parts.path.lstrip("/") or parts.username or "postgres"


def hosts(dsn: str) -> list[str]:
    """Each `host:port` a DSN names, in order (one, unless it names several for failover)."""
    parts = urlsplit(dsn)
    query = dict(parse_qsl(parts.query))
    default_port = query.get("port") or os.environ.get("PGPORT") or "5432"
    listed = parts.netloc.rpartition("@")[2]
    if not listed:
        named = query.get("host") or os.environ.get("PGHOST") or "localhost"
        ports = default_port.split(",")
        return [f"{h}:{ports[min(i, len(ports) - 1)]}" for i, h in enumerate(named.split(","))]
    found = []
    for host in listed.split(","):
        bare = host.rsplit("]", 1)[-1] if host.startswith("[") else host
        found.append(host if ":" in bare else f"{host}:{default_port}")
    return found


@dataclass(frozen=True)
class Database:
    """The database a process works on, chosen once at its entry point and passed down: its DSN,
    where to LISTEN, whether it is the embedded default, and how to start that again if it is gone.

    `resolve(settings)` chooses as every front door does: DATABASE_URL when set, otherwise the
    embedded server (started now if nobody runs it yet)."""

    dsn: str
    embedded: bool = False
    # DATABASE_LISTEN_URL, which belongs to the database of DATABASE_URL only: None for any other.
    listen_url: str | None = None
    # DATABASE_READ_URL, which likewise belongs to the database of DATABASE_URL only: None for any other.
    read_url: str | None = None

    @classmethod
    def resolve(cls, settings: Settings) -> Database:
        """DATABASE_URL as given, or the embedded server (started now if nobody runs it yet)."""
        if settings.DATABASE_URL:
            return cls.given(settings.DATABASE_URL, settings)
        return cls.embedded_default()

    @classmethod
    def given(cls, dsn: str, settings: Settings | None = None) -> Database:
        """A database named by its URL (never the embedded default, even when it is that server)."""
        ours = settings is not None and dsn == settings.DATABASE_URL
        listen = settings.DATABASE_LISTEN_URL if ours and settings is not None else None
        read = settings.DATABASE_READ_URL if ours and settings is not None else None
        return cls(dsn, embedded=False, listen_url=listen or None, read_url=read or None)

    @classmethod
    def embedded_default(cls) -> Database:
        """This user's embedded server, started now if nobody runs it yet (whatever DATABASE_URL says)."""
        from jobdesk.embedded.server import embedded_server

        dsn = embedded_server().ensure_running()
        known_direct(dsn)
        return cls(dsn, embedded=True)

    def listen_dsn(self) -> str | None:
        """Where to LISTEN for this database's notifications; None when it cannot, and must poll:
        DATABASE_LISTEN_URL when it applies, otherwise the DSN itself unless that goes through a
        transaction pooler (where a LISTEN lands on a session shared with others). Known for sure
        once a first connection has found out whether a pooler answers (`know_pooler`)."""
        if self.listen_url:
            return self.listen_url
        return None if is_pooled(self.dsn) else self.dsn

    def revive(self) -> bool:
        """A safety net for the embedded default: start its server again if it is gone; True if
        this process started it now. False, and nothing done, for any other database. Raises
        JobdeskError when the server cannot be started."""
        if not self.embedded:
            return False
        from jobdesk.embedded.server import embedded_server

        server = embedded_server()
        if server.dsn != self.dsn:
            return False
        return server.revive()

    def describe(self) -> str:
        return ("embedded " if self.embedded else "") + describe(self.dsn)


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    declare_builtin_arrays(conn)  # after the codecs above: setting one forgets the arrays'


def _unavailable(dsn: str, exc: BaseException) -> DatabaseUnavailable:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "unsupported startup parameter" in reason and not is_pooled(dsn):
        reason += f" (a pooler such as PgBouncer? remove ?{POOLER_OPTION}=false from the URL)"
    return DatabaseUnavailable(f"cannot connect to PostgreSQL at {describe(dsn)}: {reason}")


class _ClientTimedConnection(asyncpg.Connection):  # type: ignore[misc]
    """Behind a transaction pooler no session setting lasts (a `statement_timeout` startup
    parameter is even refused), so the statement timeout is asyncpg's command timeout: on expiry
    it sends a cancel request, which the pooler forwards to the server running the statement.
    Its TimeoutError becomes the error PostgreSQL gives for its own statement timeout, so that
    callers see the same failure either way (and do not take it for a lost connection)."""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        try:
            return await super().execute(*args, **kwargs)
        except TimeoutError as exc:
            raise _timed_out() from exc

    async def executemany(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        try:
            return await super().executemany(*args, **kwargs)
        except TimeoutError as exc:
            raise _timed_out() from exc

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        try:
            return await super().fetch(*args, **kwargs)
        except TimeoutError as exc:
            raise _timed_out() from exc

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        try:
            return await super().fetchval(*args, **kwargs)
        except TimeoutError as exc:
            raise _timed_out() from exc

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        try:
            return await super().fetchrow(*args, **kwargs)
        except TimeoutError as exc:
            raise _timed_out() from exc

    async def copy_to_table(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - a large enqueue's COPY
        try:
            return await super().copy_to_table(*args, **kwargs)
        except TimeoutError as exc:
            raise _timed_out() from exc


def _timed_out() -> asyncpg.QueryCanceledError:
    return asyncpg.QueryCanceledError("canceling statement due to statement timeout")


def _driver_options(dsn: str) -> tuple[str, dict[str, Any]]:
    """The DSN for asyncpg and the options its pooler mode needs: no named prepared statements
    (a pooler gives each transaction any server session, where a statement prepared on another
    does not exist, or exists twice). asyncpg then uses the unnamed statement, parsed, bound and
    run within one exchange that the pooler keeps on one server session."""
    return split_pooler(dsn)[0], ({"statement_cache_size": 0} if is_pooled(dsn) else {})


async def connect(dsn: str, *, timeout: float = 10, **kwargs: object) -> asyncpg.Connection:
    """One connection with jobdesk's codecs; DatabaseUnavailable if it cannot be had."""
    await know_pooler(dsn, timeout)
    clean, options = _driver_options(dsn)
    try:
        conn = await asyncpg.connect(clean, timeout=timeout, **options, **kwargs)
    except CONNECT_FAILURES as exc:
        raise _unavailable(dsn, exc) from exc
    await _init_connection(conn)
    return conn


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """A pool's reset on release: asyncpg has already rolled back any open transaction and
    dropped listeners. Its default reset also sends `pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL`, one more round trip per acquire, for session state jobdesk never
    leaves on a pooled connection: its settings are `SET LOCAL`/`set_config(..., true)`, its
    advisory locks are transaction-level, its cursors live in transactions, and it LISTENs on
    connections of their own (worker/listener.py)."""


def _session_settings(options: dict[str, Any], *, application_name: str | None, indexes_only: bool,
                      orders_from_indexes: bool, plan_each_call: bool,
                      statement_timeout: float | None) -> dict[str, str]:
    """The server settings of `create_pool`'s connections. Behind a pooler (`options` not empty) the
    planner settings are left to the role (a pooler refuses them at start-up), and the statement
    timeout is kept by the client instead (`options` gets it)."""
    settings: dict[str, str] = {}
    if application_name:
        settings["application_name"] = application_name  # PgBouncer accepts and tracks this one
    if indexes_only and not options:
        settings["enable_seqscan"] = "off"
    if orders_from_indexes and not options:
        settings["enable_sort"] = "off"
    if plan_each_call and not options:
        settings["plan_cache_mode"] = "force_custom_plan"
    if statement_timeout is not None:
        if options:  # pooled
            options.update(command_timeout=statement_timeout, connection_class=_ClientTimedConnection)
        else:
            settings["statement_timeout"] = str(int(statement_timeout * 1000))
    return settings


async def create_pool(dsn: str, *, size: int, timeout: float = 10, statement_timeout: float | None = None,
                      application_name: str | None = None, indexes_only: bool = False,
                      orders_from_indexes: bool = False, plan_each_call: bool = False,
                      report_outages: bool = True) -> asyncpg.Pool:
    """A pool of `size` connections with jobdesk's codecs; `statement_timeout` in seconds.
    `report_outages`: log one line when the database goes away and one when it is back
    (`jobdesk.store.outage`); off for an owner that says so itself (the worker).

    `indexes_only` (the worker's pool and the HTTP API's) keeps the planner off sequential
    scans wherever an index serves. A statement prepared on a connection is planned once for all
    its calls, so a plan made while `jobs` was small (read it all: a page or two) stayed as the
    table grew, until an ANALYZE, and each round of a worker started on a fresh database read
    every row: 140 ms instead of 4 at 200,000 rows. The API's job detail (its dependency
    sub-selects), its pipeline steps and its check of an enqueue's dependencies went the same
    way (49, 113 and 33 ms instead of 1-2 at 300,000 rows). The statements of both are meant to
    walk indexes: lookups by key, pages and capped counts.

    `orders_from_indexes` (the worker's pool) also keeps the planner off explicit sorts wherever
    an index gives the order (enable_sort). The claim walks the ready jobs of a type in the
    order of `jobs_ready_idx`; planned from statistics taken while no job was queued (an idle
    queue over millions of finished jobs, a common moment for autovacuum's ANALYZE), every
    index that starts with `status` looked as cheap, one holding "the one queued job" to be
    sorted. After a burst of 20,000 jobs each round then read and sorted all of them: 600 jobs/s
    instead of 4,700 beside 10,000,000 finished jobs (benchmarks/growth_bench.py).

    `plan_each_call` (the console's pool) plans every statement for its call instead
    (plan_cache_mode): its searches and counts rightly read whole tables, so sequential scans
    stay, and their filters' values matter to the plan (a rare status, a common one); and a
    kept plan went stale the same way: at 300,000 rows the job detail of a job with
    dependencies took 40 ms instead of 3. The HTTP API keeps its plans (`indexes_only`): planning
    its group commit for each call cost a third more per batch (2.6 ms for 20 jobs, 3.5 planned
    each call).

    Behind a pooler no statement is prepared for later calls, so each is planned for its call
    either way."""
    await know_pooler(dsn, timeout)
    clean, options = _driver_options(dsn)
    settings = _session_settings(options, application_name=application_name, indexes_only=indexes_only,
                                 orders_from_indexes=orders_from_indexes, plan_each_call=plan_each_call,
                                 statement_timeout=statement_timeout)
    try:
        pool = await FairPool(clean, min_size=min(2, size), max_size=size, timeout=timeout,
                              init=_init_connection, server_settings=settings or None,
                              max_inactive_connection_lifetime=300, reset=_keep_session,
                              where=describe(dsn) if report_outages else None, **options)
    except DatabaseUnavailable:
        raise
    except CONNECT_FAILURES as exc:
        raise _unavailable(dsn, exc) from exc
    assert pool is not None
    return pool
