"""A job's owner: jobs of an unknown user are refused, and a user that owns jobs (or the
default user) cannot be deleted, as the foreign key jobs.user_id -> users.id did, by the
owner check that replaced it (sql/023_job_owner_check.sql)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from jobdesk.core.errors import InvalidJob
from jobdesk.service.client import JobClient

PLAIN_INSERT = "INSERT INTO jobs (type, user_id, input_data) VALUES ('t', $1, '{}')"


async def test_plain_insert_of_an_unknown_user_is_a_foreign_key_violation(conn: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.ForeignKeyViolationError, match="user 999 does not exist") as err:
        await conn.execute(PLAIN_INSERT, 999)
    assert err.value.sqlstate == "23503"
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0
    # The default user, no user, and a known user are all fine.
    await conn.execute("INSERT INTO users (id, name) VALUES (7, 'seven')")
    for user_id in (1, None, 7):
        await conn.execute(PLAIN_INSERT, user_id)
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 3
    # And a job cannot be handed to an unknown user afterwards.
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await conn.execute("UPDATE jobs SET user_id = 998 WHERE user_id = 7")


async def test_the_client_names_the_unknown_user(dsn: str, conn: asyncpg.Connection) -> None:
    async with await JobClient.connect(dsn, pool_size=1) as client:
        with pytest.raises(InvalidJob, match="unknown user 999") as err:
            await client.enqueue("t", {}, user_id=999)
        assert err.value.field == "user_id"
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0


async def test_a_user_that_owns_jobs_stays(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO users (id, name) VALUES (7, 'seven'), (8, 'eight')")
    await conn.execute(PLAIN_INSERT, 7)
    with pytest.raises(asyncpg.ForeignKeyViolationError, match="user 7 owns jobs; it cannot be deleted"):
        await conn.execute("DELETE FROM users WHERE id = 7")
    with pytest.raises(asyncpg.ForeignKeyViolationError, match="user 7 owns jobs; it cannot be renumbered"):
        await conn.execute("UPDATE users SET id = 70 WHERE id = 7")
    with pytest.raises(asyncpg.ForeignKeyViolationError, match="default user"):
        await conn.execute("DELETE FROM users WHERE id = 1")
    await conn.execute("UPDATE users SET name = 'Seven' WHERE id = 7")  # other columns change freely
    await conn.execute("DELETE FROM users WHERE id = 8")  # a user without jobs goes
    assert await conn.fetchval("SELECT array_agg(id ORDER BY id) FROM users") == [1, 7]


async def test_a_delete_waits_for_a_concurrent_insert_of_the_users_job(dsn: str, conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO users (id, name) VALUES (7, 'seven')")
    other = await asyncpg.connect(dsn)
    try:
        tx = other.transaction()
        await tx.start()
        await other.execute(PLAIN_INSERT, 7)  # not committed: its user's row is locked
        delete = asyncio.create_task(conn.execute("DELETE FROM users WHERE id = 7"))
        deadline = asyncio.get_running_loop().time() + 20
        while not await other.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted"):
            assert asyncio.get_running_loop().time() < deadline, "the delete did not wait"
            await asyncio.sleep(0.05)
        assert not delete.done()
        await tx.commit()
        with pytest.raises(asyncpg.ForeignKeyViolationError, match="user 7 owns jobs"):
            await delete
    finally:
        await other.close()
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE user_id = 7") == 1
