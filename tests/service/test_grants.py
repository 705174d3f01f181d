"""`jobdesk grant viewer|operator ROLE` with real roles, connecting as them: a viewer reads what
the CLI's reads read and every action it tries is refused in one line with nothing changed; an
operator acts; grants cover the tables a later migration adds; a permission error PostgreSQL
raises anyway is said in the same words."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from jobdesk.core.errors import MissingGrant, ReadOnlyRole, WorkerNotAnswering
from jobdesk.core.schedules import Schedule
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from tests.helpers import run_cli

_roles = itertools.count(1)


def as_role(dsn: str, role: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))


@pytest.fixture
async def new_role(conn: asyncpg.Connection) -> AsyncIterator[Callable[[str], str]]:
    """Makes LOGIN roles with no grants (unique on this server; dropped at the end)."""
    made: list[str] = []

    def make(kind: str) -> str:
        made.append(f"jd_{kind}_{os.getpid()}_{next(_roles)}")
        return made[-1]

    yield make
    database = await conn.fetchval("SELECT current_database()")
    for role in made:
        await conn.execute(f"REVOKE ALL ON DATABASE {database} FROM {role}")
        await conn.execute(f"DROP OWNED BY {role}")  # its grants and default privileges in this database
        await conn.execute(f"DROP ROLE IF EXISTS {role}")


async def created(conn: asyncpg.Connection, role: str) -> str:
    await conn.execute(f"CREATE ROLE {role} LOGIN")
    return role


async def seed(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, pipeline_id) VALUES "
                       "('q1', 'mail', '{}', 'queued', 'p1'), ('f1', 'mail', '{}', 'failed', NULL), "
                       "('w1', 'review', '{}', 'waiting_approval', NULL)")
    await conn.execute("INSERT INTO job_stacks (job_id, attempt, worker_id, taken_at, frames) VALUES "
                       "('f1', 1, 'w-gone', now(), '[]')")  # the stack kept of its last run


async def snapshot(conn: asyncpg.Connection) -> tuple[object, ...]:
    jobs = await conn.fetch("SELECT id, status, is_active FROM jobs ORDER BY id")
    return (tuple(tuple(r) for r in jobs), await conn.fetchval("SELECT count(*) FROM audit_log"),
            await conn.fetchval("SELECT count(*) FROM type_controls"),
            await conn.fetchval("SELECT paused FROM schedules WHERE name = 'nightly'"),
            await conn.fetchval("SELECT count(*) FROM job_events"))


async def test_a_viewer_reads_and_every_action_is_refused_in_one_line(dsn: str, conn: asyncpg.Connection,
                                                                       new_role: Callable[[str], str]) -> None:
    viewer = await created(conn, new_role("viewer"))
    await seed(conn)
    async with await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=1) as admin:
        await admin.add_schedule(Schedule("nightly", "mail", cron="0 2 * * *"))
    granted = run_cli("grant", "viewer", viewer, dsn=dsn)
    assert granted.returncode == 0, granted.stderr
    assert f"role {viewer} is a jobdesk viewer" in granted.stdout
    url = as_role(dsn, viewer)
    for read in (["jobs"], ["show", "f1"], ["logs", "f1"], ["types"], ["stats"], ["pipelines"], ["workers"],
                 ["schedule", "list"], ["retry", "--all", "--dry-run"], ["stack", "f1"]):
        proc = run_cli(*read, dsn=url)
        assert proc.returncode == 0, (read, proc.stderr)
    before = await snapshot(conn)
    line = f"read-only: role {viewer} cannot change jobs"
    for action in (["cancel", "q1"], ["retry", "f1"], ["approve", "w1"], ["reject", "w1", "--reason", "no"],
                   ["retry", "--all"], ["cancel", "--all", "--search", "type:mail"], ["submit", "mail"],
                   ["cancel-pipeline", "p1"], ["types", "pause", "mail"], ["schedule", "pause", "nightly"],
                   ["event", "emit", "go"], ["retry", "f1", "--input", "{}"]):
        proc = run_cli(*action, dsn=url)
        assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (1, line, ""), action
    assert await snapshot(conn) == before, "nothing was changed"


async def test_an_operator_acts_and_a_viewer_grant_takes_writes_back(dsn: str, conn: asyncpg.Connection,
                                                                      new_role: Callable[[str], str]) -> None:
    role = await created(conn, new_role("operator"))
    await seed(conn)
    assert run_cli("grant", "operator", role, dsn=dsn).returncode == 0
    url = as_role(dsn, role)
    done = run_cli("cancel", "q1", dsn=url)
    assert done.returncode == 0, done.stderr
    assert run_cli("submit", "mail", dsn=url).returncode == 0
    assert run_cli("types", "pause", "mail", dsn=url).returncode == 0
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'q1'") == "cancelled"
    assert await conn.fetchval("SELECT count(*) FROM audit_log") >= 2

    assert run_cli("grant", "viewer", role, dsn=dsn).returncode == 0  # the same role, now a viewer
    proc = run_cli("retry", "q1", dsn=url)
    assert (proc.returncode, proc.stderr.strip()) == (1, f"read-only: role {role} cannot change jobs")
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'q1'") == "cancelled"
    tokens = await asyncpg.connect(url)
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await tokens.fetch("SELECT * FROM api_tokens")  # the API's credentials stay out of a viewer's reach
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await tokens.execute("UPDATE jobs SET priority = 1")
    finally:
        await tokens.close()


async def test_grants_cover_tables_a_later_migration_adds(dsn: str, conn: asyncpg.Connection,
                                                          new_role: Callable[[str], str]) -> None:
    viewer = await created(conn, new_role("viewer"))
    operator = await created(conn, new_role("operator"))
    assert run_cli("grant", "viewer", viewer, dsn=dsn).returncode == 0
    assert run_cli("grant", "operator", operator, dsn=dsn).returncode == 0
    # A migration after the grants, run by the tables' owner (as `jobdesk migrate` is).
    await conn.execute("CREATE TABLE later_rollup (id bigserial PRIMARY KEY, n int NOT NULL)")
    as_operator = await asyncpg.connect(as_role(dsn, operator))
    as_viewer = await asyncpg.connect(as_role(dsn, viewer))
    try:
        await as_operator.execute("INSERT INTO later_rollup (n) VALUES (1)")
        assert await as_viewer.fetchval("SELECT n FROM later_rollup") == 1
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await as_viewer.execute("INSERT INTO later_rollup (n) VALUES (2)")
    finally:
        await as_operator.close()
        await as_viewer.close()


async def test_bad_grants_are_one_line(dsn: str, conn: asyncpg.Connection) -> None:
    proc = run_cli("grant", "viewer", "nobody_here", dsn=dsn)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert "no role named 'nobody_here'" in proc.stderr
    superuser = await conn.fetchval("SELECT current_user::text")
    proc = run_cli("grant", "viewer", superuser, dsn=dsn)
    assert proc.returncode == 1 and "cannot be a viewer" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("grant", "admin", superuser, dsn=dsn)
    assert proc.returncode == 2 and "viewer" in proc.stderr


async def test_permission_errors_are_said_in_words(dsn: str, conn: asyncpg.Connection,
                                                   new_role: Callable[[str], str]) -> None:
    viewer = await created(conn, new_role("viewer"))
    operator = await created(conn, new_role("operator"))
    await seed(conn)
    settings = load_settings(DATABASE_URL=dsn)
    async with await JobService.connect(dsn, settings=settings, pool_size=1) as admin:
        await admin.grant_role("viewer", viewer)
        await admin.grant_role("operator", operator)
    # Enqueueing asks nothing first (its hot path); PostgreSQL's refusal is said the same way.
    async with await JobService.connect(as_role(dsn, viewer), settings=settings, pool_size=1) as jobs:
        assert await jobs.write_refusal() == f"role {viewer} cannot change jobs"
        with pytest.raises(ReadOnlyRole, match=f"^read-only: role {viewer} cannot change jobs$"):
            await jobs.enqueue("mail", {})
    # An operator missing a grant on one table (as after a migration its grants did not cover).
    await conn.execute(f"REVOKE INSERT ON audit_log FROM {operator}")
    async with await JobService.connect(as_role(dsn, operator), settings=settings, pool_size=1) as jobs:
        assert await jobs.write_refusal() is None
        with pytest.raises(MissingGrant, match=f"jobdesk grant operator {operator}"):
            await jobs.cancel(["q1"])
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'q1'") == "queued", "rolled back whole"


async def test_the_api_on_a_viewer_role_answers_403(dsn: str, conn: asyncpg.Connection,
                                                    new_role: Callable[[str], str]) -> None:
    from tests.api.conftest import serve

    viewer = await created(conn, new_role("viewer"))
    await seed(conn)
    assert run_cli("grant", "viewer", viewer, dsn=dsn).returncode == 0
    url = as_role(dsn, viewer)
    async with await JobService.connect(url, settings=load_settings(DATABASE_URL=url), pool_size=2) as jobs:
        async with serve(jobs, url, {"admin": ""}, auth=False) as api:
            assert (await api.client.get("/api/jobs/f1")).status_code == 200
            refused = await api.client.post("/api/jobs/f1/retry")
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == {"code": "read_only",
                                               "message": f"read-only: role {viewer} cannot change jobs"}
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = 'f1'") == "failed"


async def test_write_refusal_names_read_only_sessions(dsn: str, conn: asyncpg.Connection) -> None:
    settings = load_settings(DATABASE_URL=dsn)
    async with await JobService.connect(dsn, settings=settings, pool_size=1) as jobs:
        assert await jobs.write_refusal() is None
    database = await conn.fetchval("SELECT current_database()")
    await conn.execute(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    try:
        async with await JobService.connect(dsn, settings=settings, pool_size=1) as jobs:
            assert await jobs.write_refusal() == "the database's sessions are read-only (default_transaction_read_only)"
    finally:
        await conn.execute("SET default_transaction_read_only = off")
        await conn.execute(f"ALTER DATABASE {database} RESET default_transaction_read_only")


async def test_a_viewer_may_ask_a_worker_for_a_running_jobs_stack(dsn: str, conn: asyncpg.Connection,
                                                                   new_role: Callable[[str], str]) -> None:
    """`stack` is a read: the viewer's question reaches the worker (here one that never answers,
    so the answer is the worker's name, not a refusal), and is taken back afterwards."""
    viewer = await created(conn, new_role("viewer"))
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, worker_id, started_at) VALUES "
                       "('r1', 'mail', '{}', 'in_progress', 'w-silent', now())")
    assert run_cli("grant", "viewer", viewer, dsn=dsn).returncode == 0
    url = as_role(dsn, viewer)
    async with await JobService.connect(url, settings=load_settings(DATABASE_URL=url), pool_size=1) as jobs:
        with pytest.raises(WorkerNotAnswering, match="worker w-silent did not answer"):
            await jobs.job_stack("r1", within=0.3)
    assert await conn.fetchval("SELECT count(*) FROM job_stack_requests") == 0
