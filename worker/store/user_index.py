"""`jobs_user_ready_idx`, the runnable jobs by type, priority and user, made when it is needed.

The claims that walk users (fair share, limits per user: sql/022) read this index, one probe per
user visited. No other statement does, yet every job enqueued paid for an entry in it: a fifth of
the time of a bulk enqueue (benchmarks/enqueue_bench.py). Since migration 042 it exists only once
some type has per-user flow control: the first worker to learn of such a type (from its settings
at start, or an operator's change at run time) builds it with `CREATE INDEX CONCURRENTLY`, which
neither claims nor enqueues wait for. Until then those claims find the same jobs, more slowly
behind a large backlog of other users' jobs. The index stays afterwards.
"""

from __future__ import annotations

import logging

import asyncpg

from jobdesk.core.limits import FlowConfig
from jobdesk.store.db import connect, is_pooled

log = logging.getLogger(__name__)

INDEX = "jobs_user_ready_idx"
# The same definition as sql/022's and sql/042's (and only on jobs_live: no other partition holds a
# queued job).
DEFINITION = ("ON jobs_live (type, priority DESC, (COALESCE(user_id, 0)), seq) "
              "WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL")
_BUILDER_LOCK = "jobdesk: jobs_user_ready_idx"


def walks_users(config: FlowConfig) -> bool:
    """Whether the claims of a type with this flow control walk its users."""
    return config.fair_share or config.user_max_running is not None or config.user_rate is not None


async def state(conn: asyncpg.Connection) -> str:
    """`ready`, `missing`, or `invalid` (a build that did not finish)."""
    valid = await conn.fetchval("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)", INDEX)
    return "missing" if valid is None else "ready" if valid else "invalid"


async def ensure(dsn: str) -> bool:
    """Build the index unless it is there; True if this call built it, on a connection of its
    own with no statement timeout (the build reads the whole backlog). One builder at a time: a
    session advisory lock, which another builder holding it leaves to finish; a build that died
    half-way (an invalid index) is dropped and made again. Behind a transaction pooler, where a
    session lock would outlive this connection on the server's session, two workers may build
    at once (the second finds the name taken, and leaves it), and an index found not valid (being
    built by another, or left unfinished) is only reported."""
    conn = await connect(dsn)
    pooled = is_pooled(dsn)  # known once connected
    try:
        if await state(conn) == "ready":
            return False
        if not pooled:
            if not await conn.fetchval("SELECT pg_try_advisory_lock(hashtext($1))", _BUILDER_LOCK):
                return False
            await conn.execute("SET statement_timeout = 0")
        found = await state(conn)
        if found == "ready":
            return False
        if found == "invalid" and pooled:
            log.warning("%s is not valid: another worker may be building it; if none is (a build that did not "
                        "finish), drop it and a worker will build it again", INDEX)
            return False
        if found == "invalid":
            await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
        try:
            await conn.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} {DEFINITION}")
        except (asyncpg.UniqueViolationError, asyncpg.DuplicateTableError):
            return False  # another builder named it first, a moment ago
        return True
    finally:
        await conn.close()  # the session lock goes with it
