"""A job found by a part of its id (jobdesk.store.job_ids): the whole id, a start or an end of
at least 8 characters, each read through an index of `jobs`, in any collation."""

from __future__ import annotations

import asyncpg

from jobdesk.store.job_ids import _MATCHES, match_job_ids, range_end

A = "0190aaaa-bbbb-7ccc-8ddd-eeee11112222"
B = "0190aaaa-bbbb-7ccc-8ddd-ffff11112222"  # the same short id (tail) as A
C = "0190aaab-0000-7000-8000-000099998888"


async def _insert(conn: asyncpg.Connection, *ids: str, user_id: int = 1) -> None:
    await conn.executemany("INSERT INTO jobs (id, type, input_data, user_id) VALUES ($1, 'echo', '{}', $2)",
                           [(i, user_id) for i in ids])


async def test_a_job_is_found_by_its_id_its_start_or_its_end(conn: asyncpg.Connection) -> None:
    await _insert(conn, A, B, C, "my-custom-order-42")
    assert await match_job_ids(conn, C) == [C]
    assert await match_job_ids(conn, "99998888") == [C], "the short id a table prints"
    assert await match_job_ids(conn, "000099998888") == [C], "a longer end"
    assert await match_job_ids(conn, "0190aaab") == [C], "a start"
    assert await match_job_ids(conn, "0190aaab-0000-7") == [C], "a start past a hyphen"
    assert sorted(await match_job_ids(conn, "11112222")) == [A, B]
    assert sorted(await match_job_ids(conn, "0190aaaa-bbbb")) == [A, B]
    assert await match_job_ids(conn, "my-custom-o") == ["my-custom-order-42"]
    assert await match_job_ids(conn, "9998888") == [], "shorter than 8: only a whole id"
    assert await match_job_ids(conn, "aaaa-bbbb") == [], "a part from the middle is neither"


async def test_another_users_job_is_not_found(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO users (id, name) VALUES (2, 'other') ON CONFLICT DO NOTHING")
    await _insert(conn, A)
    await _insert(conn, B, user_id=2)
    assert await match_job_ids(conn, "11112222", 2) == [B]
    assert await match_job_ids(conn, A, 2) == []


def test_the_range_ends_after_every_id_with_the_start() -> None:
    assert range_end("0190aaab") == "0190aaac"
    assert range_end("0190aaa9") == "0190aaaa", "9 is followed by a, a letter in every collation"
    assert range_end("0190aaab-") == "0190aaac", "a trailing hyphen is left out"
    assert range_end("abz") == "ac" and range_end("zzz") is None


async def test_every_lookup_reads_an_index(conn: asyncpg.Connection) -> None:
    await _insert(conn, A, B, C)
    await conn.execute("ANALYZE jobs")
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")  # a lookup no index serves still scans
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + _MATCHES, "0190aaab", "0190aaac", None))
    assert "Seq Scan" not in plan, plan
    # The jobs are live: their partition is read through its primary key and its copy of
    # jobs_id_tail_idx (the other partitions, empty, through whatever index is cheapest).
    assert "jobs_live_pkey" in plan and "jobs_live_right_idx" in plan, plan
