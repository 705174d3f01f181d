"""The reads an open console repeats while jobs change, each bounded however many jobs there are:
counts of some statuses only, attention counts that stop at a cap, and the failed and waiting
jobs changed since a moment (through an index each)."""

from __future__ import annotations

import asyncpg
import pytest

from jobdesk.core.models import Status
from jobdesk.store import stats as stats_queries
from jobdesk.store.jobs import JobFilter, status_counts


async def test_status_counts_of_some_statuses_count_only_those(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data, status) SELECT 'echo', '{}', "
                       "(ARRAY['waiting_approval', 'failed', 'completed'])[1 + g % 3] FROM generate_series(1, 30) g")
    counts = await status_counts(conn, JobFilter(), only=[Status.WAITING_APPROVAL])
    assert counts.counts == {Status.WAITING_APPROVAL: 10}
    everything = await status_counts(conn, JobFilter())
    assert everything.counts[Status.FAILED] == 10 and everything.counts[Status.COMPLETED] == 10


async def test_attention_counts_stop_at_their_cap(conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats_queries, "ATTENTION_CAP", 3)
    await conn.execute("INSERT INTO jobs (type, input_data, status) SELECT 'echo', '{}', 'waiting_approval' "
                       "FROM generate_series(1, 8)")
    await conn.execute("INSERT INTO jobs (type, input_data, status) VALUES ('echo', '{}', 'failed')")
    attention = await stats_queries.fetch_attention(conn)
    assert attention.waiting_approval == 4 and attention.failed_last_hour == 1  # read up to the cap and one more
    assert attention.shown(attention.waiting_approval) == "3+" and attention.shown(1) == "1"


async def test_transitions_since_reads_the_failed_and_waiting_jobs_changed_since(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, updated_at) VALUES "
                       "('f-old', 'echo', '{}', 'failed', now() - interval '1 hour'), "
                       "('f-new', 'echo', '{}', 'failed', now()), "
                       "('w-old', 'echo', '{}', 'waiting_approval', now() - interval '1 hour'), "
                       "('w-new', 'echo', '{}', 'waiting_approval', now()), "
                       "('c-new', 'echo', '{}', 'completed', now())")
    since = await conn.fetchval("SELECT now() - interval '1 minute'")
    found = await stats_queries.fetch_transitions(conn, since)
    assert sorted(t.id for t in found) == ["f-new", "w-new"]
    assert [t.id for t in await stats_queries.fetch_transitions(conn, since, limit=1)] in (["f-new"], ["w-new"])
