"""The claim with jobs it cannot take in the table: other types, retries not yet due."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

import asyncpg

from jobdesk.core.models import Job, JobCreate, ProcessorResult, Status
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.settings import load_settings
from jobdesk.runtime.retention import make_partitions
from jobdesk.store import transitions
from jobdesk.store.db import connect
from tests.helpers import RecordsStarts, RunningWorker, seq_scans_of_jobs, set_autovacuum, wait_for


async def claim_all(conn: asyncpg.Connection, types: list[str], batch: int) -> list[str]:
    """Claim until nothing is left; the ids in the order the claims returned them."""
    order: list[str] = []
    while True:
        _, jobs = await transitions.complete_and_claim(conn, "w-test", types, batch)
        if not jobs:
            return order
        order += [j.id for j in jobs]


async def add_backlog(conn: asyncpg.Connection, n: int) -> None:
    """Jobs no claim of the tests may take: an unserved type, and retries an hour away."""
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'nobody.' || (g % 7), '{}' "
                       "FROM generate_series(1, $1) g", n)
    await conn.execute("INSERT INTO jobs (type, input_data, retry_count, next_retry_at) "
                       "SELECT 'a', '{}', 1, now() + interval '1 hour' FROM generate_series(1, $1)", n)


async def expected_order(conn: asyncpg.Connection, types: list[str]) -> list[str]:
    rows = await conn.fetch("SELECT id FROM jobs WHERE type = ANY($1::text[]) AND status = 'queued' "
                            "AND (next_retry_at IS NULL OR next_retry_at <= now()) ORDER BY priority DESC, seq",
                            types)
    return [r["id"] for r in rows]


async def test_oldest_first_within_priority_across_types(conn: asyncpg.Connection) -> None:
    await add_backlog(conn, 300)
    jobs = [JobCreate(("a", "b", "c")[i % 3], {"i": i}, priority=(i // 3) % 3) for i in range(90)]
    await transitions.enqueue(conn, jobs)
    types = ["a", "b", "c", "echo"]
    expected = await expected_order(conn, types)
    assert len(expected) == 90
    assert await claim_all(conn, types, 7) == expected
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status <> 'queued' AND type LIKE 'nobody.%'") == 0
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued' AND type = 'a'") == 300


async def test_many_types_take_the_lateral_walk_in_the_same_order(conn: asyncpg.Connection) -> None:
    types = [f"t{i:02d}" for i in range(transitions.UNION_MAX_TYPES + 8)]
    await add_backlog(conn, 200)
    await transitions.enqueue(conn, [JobCreate(types[(i * 7) % len(types)], {}, priority=i % 2) for i in range(120)])
    expected = await expected_order(conn, types)
    assert await claim_all(conn, types, 9) == expected


async def test_future_retries_wait_and_due_ones_compete_in_order(conn: asyncpg.Connection) -> None:
    # Plain SQL with a retry time, as a backend may write it: it waits for that time.
    await conn.execute("INSERT INTO jobs (id, type, input_data, next_retry_at) VALUES "
                       "('later', 'a', '{}', now() + interval '1 hour'), "
                       "('due-old', 'a', '{}', now() + interval '300 milliseconds'), "
                       "('due-other', 'nobody', '{}', now() + interval '300 milliseconds')")
    await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('ready-1', 'a', '{}'), ('ready-2', 'b', '{}')")
    assert await claim_all(conn, ["a", "b"], 1) == ["ready-1", "ready-2"]
    await conn.execute("UPDATE jobs SET status = 'queued', worker_id = NULL WHERE id LIKE 'ready-%'")
    await asyncio.sleep(0.35)
    # Now due, 'due-old' is older than the ready jobs and goes first; the due job of a type this
    # worker does not serve is made runnable for others, not taken.
    assert await claim_all(conn, ["a", "b"], 2) == ["due-old", "ready-1", "ready-2"]
    rows = {r["id"]: r for r in await conn.fetch("SELECT id, status, run_at, next_retry_at FROM jobs")}
    assert rows["due-other"]["status"] == "queued" and rows["due-other"]["run_at"] is None
    assert rows["due-other"]["next_retry_at"] is not None  # what was scheduled stays readable
    assert rows["later"]["status"] == "queued" and rows["later"]["run_at"] is not None
    assert await claim_all(conn, ["nobody"], 5) == ["due-other"]


async def test_insert_trigger_still_checks_what_it_checked(conn: asyncpg.Connection) -> None:
    # Skipped for independent jobs, the trigger still corrects a pending_deps given by hand.
    await conn.execute("INSERT INTO jobs (id, type, input_data, pending_deps) VALUES ('p', 'a', '{}', 3)")
    assert await conn.fetchval("SELECT pending_deps FROM jobs WHERE id = 'p'") == 0
    await conn.execute("INSERT INTO jobs (id, type, input_data, dependent_on_jobs) VALUES ('n', 'a', '{}', NULL)")
    assert await claim_all(conn, ["a"], 5) == ["p", "n"]
    for deps, code in ((["missing"], "JD003"), ([1], "JD001"), (["self"], "JD002")):
        try:
            await conn.execute("INSERT INTO jobs (id, type, input_data, dependent_on_jobs) "
                               "VALUES ('self', 'a', '{}', $1::jsonb)", deps)
        except asyncpg.PostgresError as exc:
            assert exc.sqlstate == code
        else:
            raise AssertionError(f"{deps} was accepted")
    try:
        await conn.execute("INSERT INTO jobs (type, input_data, dependent_on_jobs) VALUES ('a', '{}', '5')")
    except asyncpg.CheckViolationError:
        pass
    else:
        raise AssertionError("a scalar dependent_on_jobs was accepted")
    # The status check (sql/018) takes every status and nothing else, also on an UPDATE.
    for status in Status:
        await conn.execute("INSERT INTO jobs (type, input_data, status) VALUES ('s', '{}', $1)", status.value)
    for sql in ("INSERT INTO jobs (type, input_data, status) VALUES ('s', '{}', 'done')",
                "UPDATE jobs SET status = 'Queued' WHERE type = 's'"):
        try:
            await conn.execute(sql)
        except asyncpg.CheckViolationError as exc:
            assert exc.constraint_name == "jobs_status_check"
        else:
            raise AssertionError(f"{sql} was accepted")


async def test_no_job_is_claimed_twice_by_concurrent_claims(conn: asyncpg.Connection, dsn: str) -> None:
    await add_backlog(conn, 500)
    types = ["a", "b", "c"]
    await transitions.enqueue(conn, [JobCreate(types[i % 3], {}, priority=i % 2) for i in range(900)])
    # Jobs whose retry comes while the claims run, of served and unserved types.
    await conn.execute("INSERT INTO jobs (type, input_data, next_retry_at) "
                       "SELECT (ARRAY['a', 'b', 'nobody'])[1 + g % 3], '{}', "
                       "now() + make_interval(secs => g / 1000.0) FROM generate_series(1, 300) g")
    claimed: Counter[str] = Counter()

    async def claimer(worker: str, batch: int) -> None:
        c = await connect(dsn)
        try:
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 0.5:
                _, jobs = await transitions.complete_and_claim(c, worker, types, batch)
                claimed.update(j.id for j in jobs)
                if jobs:
                    idle_since = time.monotonic()
                await asyncio.sleep(0)
        finally:
            await c.close()

    await asyncio.gather(*(claimer(f"w{i}", 3 + 4 * i) for i in range(4)))
    assert claimed and max(claimed.values()) == 1, "a job was claimed twice"
    runnable = await conn.fetchval("SELECT count(*) FROM jobs WHERE type = ANY($1::text[]) AND "
                                   "(next_retry_at IS NULL OR next_retry_at <= now())", types)
    assert len(claimed) == runnable == 1100
    in_progress = await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'in_progress'")
    assert in_progress == len(claimed)


class FailsOnce(BaseProcessor):
    def __init__(self) -> None:
        self.starts: dict[str, list[float]] = {}

    async def process(self, job: Job) -> ProcessorResult:
        self.starts.setdefault(job.id, []).append(time.time())
        if job.attempt == 1:
            raise RuntimeError("first attempt fails")
        return ProcessorResult({})


async def test_a_retry_starts_within_the_poll_interval_of_its_time(conn: asyncpg.Connection, dsn: str) -> None:
    poll = 0.1
    await add_backlog(conn, 1000)
    processor = FailsOnce()
    worker = RunningWorker(dsn, {"a": processor}, JOB_PROCESSOR_POLL_INTERVAL=poll,
                           JOB_RETRY_INTERVALS=[0.7])
    try:
        ids = []
        for _ in range(3):
            [job_id] = await transitions.enqueue(conn, [JobCreate("a", {})])
            ids.append(job_id)
            await asyncio.sleep(0.23)  # the retries come at different moments of the poll cycle
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 3 FROM jobs WHERE id = ANY($1::text[]) "
                                             "AND status = 'completed'", ids), what="the retries")
    finally:
        await worker.stop()
    for job_id in ids:
        # The failure's history row is written by the statement that set next_retry_at = now() + 0.7.
        due = await conn.fetchval("SELECT extract(epoch FROM finished_at)::float8 + 0.7 FROM job_attempts "
                                  "WHERE job_id = $1", job_id)
        first, second = processor.starts[job_id]
        assert due - first >= 0.6
        assert -0.01 <= second - due <= poll + 0.05, (job_id, second - due)


async def test_each_insert_statement_notifies_once_on_both_channels(conn: asyncpg.Connection, dsn: str) -> None:
    listener = await connect(dsn)
    heard: list[tuple[str, str]] = []
    for channel in ("jobdesk_new_jobs", "jobdesk_job_changes"):
        await listener.add_listener(channel, lambda *args: heard.append((args[2], args[3])))
    try:
        await conn.executemany("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'a', '{}')", [("r1",), ("r2",)])
        await conn.execute("INSERT INTO jobs (id, type, input_data) SELECT 'm' || g, 'a', '{}' "
                           "FROM generate_series(1, 200) g")
        await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'a', '{}' WHERE false")
        await wait_for(lambda: asyncio.sleep(0.05, len(heard) >= 6), what="the notifications")
        await asyncio.sleep(0.1)
    finally:
        await listener.close()
    # executemany runs in one transaction: its second row comes after its first in walk order,
    # so only the first statement says how low the new jobs go ('<priority>:<seq>', sql/031).
    # An insert of no row says nothing of where (an empty payload).
    assert heard == [("jobdesk_new_jobs", "0:1"), ("jobdesk_job_changes", "r1"), ("jobdesk_job_changes", "r2"),
                     ("jobdesk_new_jobs", "0:3"), ("jobdesk_job_changes", "*"),
                     ("jobdesk_new_jobs", "")]


async def test_a_later_insert_of_a_higher_priority_says_so_again(conn: asyncpg.Connection, dsn: str) -> None:
    """Within a transaction, a statement whose jobs come before those already told of in walk
    order (a higher priority) tells again; one of the same or a lower priority does not."""
    listener = await connect(dsn)
    heard: list[str] = []
    await listener.add_listener("jobdesk_new_jobs", lambda *args: heard.append(args[3]))
    try:
        async with conn.transaction():
            for priority in (0, 0, -3, 5, 2, 9):
                await conn.execute("INSERT INTO jobs (type, input_data, priority) VALUES ('a', '{}', $1)", priority)
        await wait_for(lambda: asyncio.sleep(0.05, len(heard) >= 3), what="the notifications")
        await asyncio.sleep(0.1)
    finally:
        await listener.close()
    assert heard == ["0:1", "5:4", "9:6"]


async def test_a_transaction_of_row_by_row_inserts_notifies_like_one_batch(conn: asyncpg.Connection,
                                                                           dsn: str) -> None:
    listener = await connect(dsn)
    heard: list[tuple[str, str]] = []
    for channel in ("jobdesk_new_jobs", "jobdesk_job_changes"):
        await listener.add_listener(channel, lambda *args: heard.append((args[2], args[3])))
    try:
        async with conn.transaction():
            await conn.executemany("INSERT INTO jobs (id, type, input_data) VALUES ($1, 'a', '{}')",
                                   [(f"r{i}",) for i in range(300)])
        await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('later', 'a', '{}')")
        await wait_for(lambda: asyncio.sleep(0.05, ("jobdesk_job_changes", "later") in heard),
                       what="the notifications")
        await asyncio.sleep(0.1)
    finally:
        await listener.close()
    changes = [payload for channel, payload in heard if channel == "jobdesk_job_changes"]
    # The first 150 rows are named one by one, then one '*' stands for the rest of the
    # transaction; the next transaction names its rows again.
    assert changes == [f"r{i}" for i in range(150)] + ["*", "later"]
    assert [payload for channel, payload in heard if channel == "jobdesk_new_jobs"] == ["0:1", "0:301"]
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 301


async def test_ids_made_by_the_database_are_time_ordered_uuid7(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'a', '{}' FROM generate_series(1, 50)")
    ids = [r["id"] for r in await conn.fetch("SELECT id FROM jobs ORDER BY seq")]
    parsed = [uuid.UUID(i) for i in ids]
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in parsed)
    assert [u.bytes[:6] for u in parsed] == sorted(u.bytes[:6] for u in parsed)  # milliseconds first


async def test_database_ids_are_canonical_carry_their_time_and_differ_across_seeded_sessions(
        conn: asyncpg.Connection, dsn: str) -> None:
    rows = await conn.fetch("SELECT jobdesk_uuid7() AS id, clock_timestamp() AS at FROM generate_series(1, 20000)")
    ids = [r["id"] for r in rows]
    assert [str(uuid.UUID(i)) for i in ids] == ids  # lower-case, 36 characters, hyphens in place
    assert len(set(ids)) == len(ids)
    for r in rows[::1000]:
        ms = int.from_bytes(uuid.UUID(r["id"]).bytes[:6], "big")
        assert abs(ms - r["at"].timestamp() * 1000) < 5, "the first 48 bits are the time in milliseconds"
    # Two sessions whose random generators were seeded alike still draw different ids, even in
    # the same millisecond: compared without their time, they share nothing.
    other = await asyncpg.connect(dsn)
    try:
        drawn = []
        for c in (conn, other):
            await c.execute("SELECT setseed(0.5)")
            drawn.append(await c.fetchval("SELECT array_agg(jobdesk_uuid7()) FROM generate_series(1, 100)"))
        assert not {i[14:] for i in drawn[0]} & {i[14:] for i in drawn[1]}
    finally:
        await other.close()


def test_ids_made_in_python_are_time_ordered_uuid7_in_canonical_form() -> None:
    from jobdesk.core.models import new_job_id

    ids = [new_job_id() for _ in range(200)]
    parsed = [uuid.UUID(i) for i in ids]
    assert [str(u) for u in parsed] == ids  # lower-case, hyphens where UUIDs have them
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in parsed)
    assert [u.bytes[:6] for u in parsed] == sorted(u.bytes[:6] for u in parsed)
    assert len(set(ids)) == len(ids)


def _id_tails(n: int) -> list[str]:
    from jobdesk.core.models import new_job_id

    return [new_job_id()[15:] for _ in range(n)]  # the random part, after the time and the version


def test_a_forked_process_draws_other_ids() -> None:
    """The random bits of ids are reseeded in a forked child, so parent and child never draw the
    same ones (as they would from one generator state)."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        theirs = pool.apply(_id_tails, (100,))
    assert not set(theirs) & set(_id_tails(100))


async def claim_statements(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """How the claim statements this connection prepared were planned."""
    return await conn.fetch("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                            "WHERE statement LIKE '%FOR UPDATE SKIP LOCKED%' AND statement NOT LIKE '%pg_prepared%'")


async def test_a_claim_of_many_types_behind_an_analyzed_backlog_is_planned_once(conn: asyncpg.Connection) -> None:
    # Statistics that have seen a backlog made every call of the claim plan anew (custom plans
    # only), which cost more than running it. Its plan must be kept, and claim in the same order.
    types = [f"t{i:02d}" for i in range(20)]
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'nobody.' || (g % 50), '{}' "
                       "FROM generate_series(1, 20000) g")
    await conn.execute("INSERT INTO jobs (type, input_data, retry_count, next_retry_at) "
                       "SELECT 't00', '{}', 1, now() + interval '1 hour' FROM generate_series(1, 5000)")
    await conn.execute("ANALYZE jobs")
    await transitions.enqueue(conn, [JobCreate(types[(i * 3) % 20], {}, priority=i % 2) for i in range(300)])
    expected = await expected_order(conn, types)
    order: list[str] = []
    finished: list[tuple[Job, ProcessorResult]] = []
    for _ in range(12):  # claims alone: the plan cache keeps a generic plan after five custom ones
        _, jobs = await transitions.complete_and_claim(conn, "w-test", types, 5)
        order += [j.id for j in jobs]
    while True:  # completions with claims, the worker's usual round
        _, jobs = await transitions.complete_and_claim(conn, "w-test", types, 5, finished)
        order += [j.id for j in jobs]
        if not jobs:
            break
        finished = [(j, ProcessorResult({})) for j in jobs]
    assert order == expected
    plans = await claim_statements(conn)
    assert len(plans) == 2, plans
    for plan in plans:
        assert plan["custom_plans"] <= 5 and plan["generic_plans"] >= 6, plans
    counts = dict(await conn.fetch("SELECT status, count(*) FROM jobs WHERE type = ANY($1::text[]) "
                                   "AND next_retry_at IS NULL GROUP BY status", types))
    assert counts == {"in_progress": 60, "completed": 240}  # those the claims alone took are still running


async def test_lanes_split_every_type_between_a_workers_claim_loops(conn: asyncpg.Connection, dsn: str) -> None:
    """A worker's two claim loops each walk their own lane: together every job once, each lane
    in claim order and about half of every type; while one lane's claim is open, the other
    lane's claim goes ahead at once and takes none of its rows."""
    await conn.execute("INSERT INTO jobs (type, input_data, priority) SELECT (ARRAY['a', 'b'])[1 + g % 2], '{}', "
                       "g % 3 FROM generate_series(1, 200) g")
    await add_backlog(conn, 50)
    expected = await expected_order(conn, ["a", "b"])
    other = await connect(dsn)
    try:
        async with conn.transaction():
            _, first = await transitions.complete_and_claim(conn, "w-test", ["a", "b"], 30, lane=(0, 2))
            _, second = await asyncio.wait_for(
                transitions.complete_and_claim(other, "w-test", ["a", "b"], 30, lane=(1, 2)), 5)
            assert len(first) == len(second) == 30 and not {j.id for j in first} & {j.id for j in second}
            # Nothing but its own claims is locked by the open claim.
            taken = [j.id for j in first]
            assert len(await other.fetch("SELECT id FROM jobs WHERE status = 'queued' AND NOT id = ANY($1::text[]) "
                                         "FOR UPDATE NOWAIT", taken)) == 200 + 100 - 60
        lanes = [[j.id for j in first], [j.id for j in second]]
        for index in (0, 1):
            while True:
                _, jobs = await transitions.complete_and_claim(conn, "w-test", ["a", "b"], 25, lane=(index, 2))
                if not jobs:
                    break
                lanes[index] += [j.id for j in jobs]
    finally:
        await other.close()
    assert not set(lanes[0]) & set(lanes[1]) and sorted(lanes[0] + lanes[1]) == sorted(expected)
    for lane in lanes:
        assert lane == [i for i in expected if i in set(lane)], "each lane in claim order"
    types = dict(await conn.fetch("SELECT id, type FROM jobs WHERE id = ANY($1::text[])", lanes[0]))
    assert 20 <= Counter(types.values())["a"] <= 80 and 20 <= Counter(types.values())["b"] <= 80
    assert await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued' AND type IN ('a', 'b') "
                               "AND run_at IS NULL") == 0


async def test_a_worker_started_on_a_small_table_keeps_to_the_indexes_as_it_grows(conn: asyncpg.Connection,
                                                                                  dsn: str) -> None:
    """A worker's statements are prepared once per connection, and PostgreSQL plans a prepared
    statement once for all its calls. Planned while the table was small, a read of every row
    was the cheapest plan, and it stayed: with 200,000 rows each round read them all (140 ms
    instead of 4) until an ANALYZE made the worker plan again. Without statistics on a grown
    table (autovacuum off here), the worker must still read `jobs` through its indexes only."""
    await set_autovacuum(conn, False)
    await conn.execute("SET enable_seqscan = off")  # this test's own reads
    done = "SELECT count(*) FROM jobs WHERE status = 'completed' AND type = 't'"

    async def run_batches(first: int) -> None:
        for i in range(first, first + 8):
            await transitions.enqueue(conn, [JobCreate("t", {}) for _ in range(3)])
            await wait_for(lambda n=3 * (i + 1): conn.fetchval(f"{done} HAVING count(*) = {n}"), what=f"batch {i}")

    # The completed jobs' partitions made ahead now, not by the worker's first retention round:
    # each index of a new partition is built by reading it, which counts as a sequential scan,
    # and the worker's pool connection reports that only when it is used again or idle for 10 s
    # (sometimes after `before` below).
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        await make_partitions(pool, load_settings(DATABASE_URL=dsn))
    finally:
        await pool.close()
    worker = RunningWorker(dsn, {"t": RecordsStarts()})
    try:
        await run_batches(0)  # enough calls of each statement for PostgreSQL to keep one plan for them
        await conn.execute("INSERT INTO jobs (type, user_id, input_data, status) "
                           "SELECT 'old', 1, '{}', 'completed' FROM generate_series(1, 50000)")
        before = await seq_scans_of_jobs(conn)
        await run_batches(8)
        assert await seq_scans_of_jobs(conn) == before
    finally:
        await worker.stop()
