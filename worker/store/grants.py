"""What a PostgreSQL role may do with jobdesk's tables: the grants of `jobdesk grant viewer|operator
ROLE`, and the question every action asks first, whether this connection's role can change jobs.

A viewer reads every table of the schema but the API's credentials (token hashes, idempotency
keys) and changes nothing (it may only ask a worker for a running job's stack, a request row that
is taken back); an operator reads and writes every table (acts on jobs, pauses types
and schedules, commands workers, enqueues, and may run workers and the HTTP API). Both are
granted on the tables there are now and, through default privileges of the role that owns the
tables, on those a later migration adds (when that same role runs `jobdesk migrate`)."""

from __future__ import annotations

import asyncpg

from jobdesk.core.errors import JobdeskError

LEVELS = ("viewer", "operator")
SCHEMA = "public"
# The tables a viewer does not read: the API's credentials, read by nothing a viewer runs.
SECRET_TABLES = ("api_tokens", "api_idempotency_keys")
WRITES = "INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER"

# The role of this connection when it cannot change jobs (no UPDATE on `jobs`), else no row.
CANNOT_ACT = "SELECT current_user::text WHERE NOT has_table_privilege('jobs', 'UPDATE')"


async def role_that_cannot_act(conn: asyncpg.Connection | asyncpg.Pool) -> str | None:
    """This connection's role, if it may not change jobs; None when it may."""
    role: str | None = await conn.fetchval(CANNOT_ACT)
    return role


async def write_refusal(conn: asyncpg.Connection | asyncpg.Pool) -> str | None:
    """Why nothing can be changed through this connection, in a few words; None when it can."""
    row = await conn.fetchrow(
        "SELECT current_user::text AS role, has_table_privilege('jobs', 'UPDATE') AS can_update, "
        "pg_is_in_recovery() AS standby, current_setting('transaction_read_only') = 'on' AS read_only")
    if not row["can_update"]:
        return f"role {row['role']} cannot change jobs"
    if row["standby"]:
        return "the database is a standby (in recovery)"
    if row["read_only"]:
        return "the database's sessions are read-only (default_transaction_read_only)"
    return None


def _statements(level: str, role: str, owner: str) -> list[str]:
    """The GRANT and REVOKE statements that make `role` (quoted) a viewer or an operator, for the
    tables there are and those `owner` (quoted) creates later in the schema."""
    defaults = f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {SCHEMA}"
    common = [f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role}"]
    if level == "operator":
        return [*common,
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}",
                f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {role}",
                f"{defaults} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}",
                f"{defaults} GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {role}"]
    return [*common,  # a viewer: what an operator could write is taken back, then reads are granted
            f"REVOKE {WRITES} ON ALL TABLES IN SCHEMA {SCHEMA} FROM {role}",
            f"REVOKE USAGE, UPDATE ON ALL SEQUENCES IN SCHEMA {SCHEMA} FROM {role}",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}",
            f"GRANT SELECT ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {role}",
            *(f"REVOKE ALL ON TABLE {SCHEMA}.{table} FROM {role}" for table in SECRET_TABLES),
            # Asking a worker for a running job's stack (`jobdesk stack`) writes a request, and
            # takes it back: a question, which changes no job.
            f"GRANT INSERT, DELETE ON TABLE {SCHEMA}.job_stack_requests TO {role}",
            f"GRANT USAGE ON SEQUENCE {SCHEMA}.job_stack_requests_id_seq TO {role}",
            f"{defaults} REVOKE {WRITES} ON TABLES FROM {role}",
            f"{defaults} REVOKE USAGE, UPDATE ON SEQUENCES FROM {role}",
            f"{defaults} GRANT SELECT ON TABLES TO {role}",
            f"{defaults} GRANT SELECT ON SEQUENCES TO {role}"]


async def grant(conn: asyncpg.Connection, level: str, role: str) -> str:
    """Make an existing `role` a viewer or an operator of this database's jobdesk tables, in one
    transaction; returns the role that owns the tables (whose later tables it covers too).
    A viewer is refused for a superuser or the tables' owner: they can change jobs whatever the
    grants say."""
    if level not in LEVELS:
        raise JobdeskError(f"unknown level {level!r}; use {' or '.join(LEVELS)}")
    found = await conn.fetchrow(
        "SELECT r.rolsuper AS superuser, pg_has_role(r.oid, t.tableowner, 'USAGE') AS owns, "
        "       quote_ident(r.rolname) AS quoted, t.tableowner::text AS owner, quote_ident(t.tableowner) AS owner_q, "
        "       pg_has_role(current_user, t.tableowner, 'USAGE') AS may_grant "
        "  FROM pg_roles r, pg_tables t WHERE r.rolname = $1 AND t.schemaname = $2 AND t.tablename = 'jobs'",
        role, SCHEMA)
    if found is None:
        exists = await conn.fetchval("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", role)
        if not exists:
            raise JobdeskError(f"no role named {role!r} on this server; create it first (CREATE ROLE ... LOGIN)")
        raise JobdeskError("this database has no jobs table; run `jobdesk migrate` first")
    if not found["may_grant"]:
        raise JobdeskError(f"only the owner of jobdesk's tables ({found['owner']}), a member of it or a superuser "
                           f"can grant them; this connection is another role")
    if level == "viewer" and (found["superuser"] or found["owns"]):
        why = "a superuser" if found["superuser"] else f"the owner of jobdesk's tables ({found['owner']})"
        raise JobdeskError(f"role {role} is {why}: it can change jobs whatever it is granted, so it cannot be a viewer")
    async with conn.transaction():
        for statement in _statements(level, found["quoted"], found["owner_q"]):
            await conn.execute(statement)
    return str(found["owner"])
