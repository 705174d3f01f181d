"""A multi-host DATABASE_URL against a real primary and synchronous standby (tests/replication.py):
the CLI and the client on it, the client's error while no host is writable, and a worker that
goes on through a failover (the primary killed with SIGKILL, the standby promoted)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence

import asyncpg
import httpx
import pytest

from jobdesk import DatabaseUnavailable, JobClient
from jobdesk.core.models import Job, JobCreate, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from jobdesk.runtime.outcomes import Finished
from jobdesk.store import transitions
from jobdesk.store.db import CONNECTION_ERRORS
from jobdesk.store.migrations import migrate
from tests.helpers import JOBDESK, ROOT, RunningWorker, cli_env, run_cli
from tests.replication import Pair, free_port

JOBS = 5000


@pytest.fixture
def pair() -> Iterator[Pair]:
    replicated = Pair().start()
    try:
        yield replicated
    finally:
        replicated.stop()


async def test_cli_and_client_on_two_hosts(pair: Pair) -> None:
    url = pair.url()
    done = run_cli("migrate", dsn=url)
    assert done.returncode == 0, done.stderr
    async with await JobClient.connect(url) as client:
        job_id = await client.enqueue("echo", {"x": 1})
        assert (await client.get_job(job_id)).status == "queued"
        await asyncio.to_thread(pair.primary.kill)
        # A client already connected: its reads and writes say the database is away, in one line.
        raised: list[BaseException] = []
        for _ in range(3):  # the first may meet a connection that broke; the next ones must reconnect
            try:
                await client.get_job(job_id)
            except (*CONNECTION_ERRORS, DatabaseUnavailable) as exc:
                raised.append(exc)
        assert len(raised) == 3 and isinstance(raised[-1], DatabaseUnavailable), raised
        with pytest.raises(DatabaseUnavailable, match="was not written"):
            await client.enqueue("echo", {})
    # Only the standby answers now, and it is read-only: a connection error, not a ValueError.
    with pytest.raises(DatabaseUnavailable) as caught:
        await JobClient.connect(url)
    assert pair.primary.host in str(caught.value) and pair.standby.host in str(caught.value)
    enqueued = run_cli("enqueue", "echo", "{}", dsn=url)
    assert enqueued.returncode != 0 and len(enqueued.stderr.strip().splitlines()) == 1, enqueued.stderr
    assert "Traceback" not in enqueued.stderr
    await asyncio.to_thread(pair.standby.promote)
    async with await JobClient.connect(url) as client:
        assert (await client.get_job(job_id)).status == "queued"  # the job was replicated before the kill


class Quick(BaseProcessor):
    """A few milliseconds of work; counts its runs per job."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    async def process(self, job: Job) -> ProcessorResult:
        self.runs[job.id] = self.runs.get(job.id, 0) + 1
        await asyncio.sleep(0.002)
        return ProcessorResult(result_data={"job": job.id})


_COUNT_RESULT_WRITES = """
CREATE TABLE result_writes (job_id text NOT NULL);
CREATE FUNCTION count_result_write() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN INSERT INTO result_writes VALUES (NEW.id); RETURN NULL; END $$;
CREATE TRIGGER count_result_write AFTER UPDATE OF result_data ON jobs FOR EACH ROW
  WHEN (NEW.result_data IS DISTINCT FROM OLD.result_data) EXECUTE FUNCTION count_result_write();
-- A completion moves the row into jobs_completed (sql/041), which fires INSERT triggers there.
CREATE TRIGGER count_result_write_on_move AFTER INSERT ON jobs_completed FOR EACH ROW
  WHEN (NEW.result_data IS NOT NULL) EXECUTE FUNCTION count_result_write();
"""


async def _completed(url: str) -> int:
    try:
        conn = await asyncpg.connect(url, timeout=2)
    except (OSError, asyncpg.PostgresError, asyncpg.InternalClientError, TimeoutError):
        return -1
    try:
        return int(await conn.fetchval("SELECT count(*) FROM jobs WHERE status = 'completed'"))
    finally:
        await conn.close()


async def test_a_worker_goes_on_through_a_failover(pair: Pair) -> None:
    url = pair.url()
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
        await conn.execute(_COUNT_RESULT_WRITES)
        await transitions.enqueue(conn, [JobCreate("quick", {}) for _ in range(JOBS)])
    finally:
        await conn.close()
    processor = Quick()
    worker = RunningWorker(url, {"quick": processor}, JOB_PROCESSOR_POLL_INTERVAL=0.5)
    told: set[str] = set()  # the completions whose commit the worker was told of
    outcomes = worker.worker.outcomes
    account = outcomes.account

    def noted(batch: Sequence[Finished], written: set[str], completed: set[str] | None = None) -> None:
        told.update(completed if completed is not None else written)
        account(batch, written, completed)

    outcomes.account = noted  # type: ignore[method-assign]
    try:
        deadline = time.monotonic() + 60
        while len(told) < JOBS // 4:
            assert time.monotonic() < deadline, "the worker did not get going"
            await asyncio.sleep(0.05)
        await asyncio.to_thread(pair.primary.kill)
        told_before_kill = set(told)
        assert len(told_before_kill) < JOBS, "the primary was killed mid-run"
        await asyncio.sleep(1)  # a failover takes a moment: the worker finds no writable host meanwhile
        await asyncio.to_thread(pair.standby.promote)
        new_primary = pair.standby.dsn()
        deadline = time.monotonic() + 60
        while await _completed(new_primary) < JOBS:
            assert time.monotonic() < deadline, f"only {await _completed(new_primary)} jobs completed"
            await asyncio.sleep(0.2)
    finally:
        await worker.stop()
    conn = await asyncpg.connect(pair.standby.dsn())
    try:
        statuses = dict(await conn.fetch("SELECT status, count(*) FROM jobs GROUP BY status"))
        assert statuses == {"completed": JOBS}
        completed = {r["id"] for r in await conn.fetch("SELECT id FROM jobs WHERE status = 'completed'")}
        assert told_before_kill <= completed and told <= completed
        writes = await conn.fetchval("SELECT count(*) FROM (SELECT job_id FROM result_writes GROUP BY job_id "
                                     "HAVING count(*) > 1) twice")
        assert writes == 0, "result_data is written once per job"
        assert await conn.fetchval("SELECT count(DISTINCT job_id) FROM result_writes") == JOBS
    finally:
        await conn.close()
    twice = [job_id for job_id, runs in processor.runs.items() if runs > 1]
    # At least once: a job whose claim was lost with the primary may run again, but not in this
    # worker while it still runs it.
    print(f"failover: {len(told_before_kill)} of {JOBS} completed at the kill, {len(twice)} ran twice")
    assert len(processor.runs) == JOBS and len(twice) <= 50, twice[:5]


class Slow(BaseProcessor):
    """Two seconds of work; counts its runs per job."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    async def process(self, job: Job) -> ProcessorResult:
        self.runs[job.id] = self.runs.get(job.id, 0) + 1
        await asyncio.sleep(2)
        return ProcessorResult(result_data={"job": job.id})


async def test_jobs_claimed_just_before_the_kill_run_once_and_complete(pair: Pair) -> None:
    """Ten jobs claimed by an idle worker just as the primary dies: the claim commits
    asynchronously, so the promoted standby may not have it, and the worker claims them again
    under the same attempt. None is cancelled, each runs once."""
    url = pair.url()
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    processor = Slow()
    worker = RunningWorker(url, {"slow": processor}, MAX_CONCURRENT_JOBS=10)
    try:
        conn = await asyncpg.connect(url)
        try:
            ids = await transitions.enqueue(conn, [JobCreate("slow", {}) for _ in range(10)])
            deadline = time.monotonic() + 30
            while len(processor.runs) < 10:
                assert time.monotonic() < deadline, "the jobs did not start"
                await asyncio.sleep(0.01)
        finally:
            conn.terminate()
        await asyncio.to_thread(pair.primary.kill)
        await asyncio.to_thread(pair.standby.promote)
        deadline = time.monotonic() + 60
        while await _completed(pair.standby.dsn()) < 10:
            assert time.monotonic() < deadline, "the jobs did not complete"
            await asyncio.sleep(0.2)
    finally:
        await worker.stop()
    conn = await asyncpg.connect(pair.standby.dsn())
    try:
        rows = await conn.fetch("SELECT status, attempts FROM jobs WHERE id = ANY($1::text[])", ids)
        assert [r["status"] for r in rows] == ["completed"] * 10
        assert not await conn.fetchval("SELECT count(*) FROM job_attempts WHERE outcome = 'cancelled'")
    finally:
        await conn.close()
    assert processor.runs == {job_id: 1 for job_id in ids}


async def test_doctor_shows_the_primary_and_each_standby(pair: Pair) -> None:
    url = pair.url()
    assert run_cli("migrate", dsn=url).returncode == 0
    healthy = run_cli("doctor", dsn=url)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    lines = healthy.stdout.splitlines()
    assert f"{pair.primary.host}  primary  accepts writes" in lines
    assert any(line.startswith(f"{pair.standby.host}  standby  replay delay") and "bytes behind" in line
               for line in lines), lines
    assert any(line.startswith("standby ") and "streaming, sync" in line for line in lines), lines
    assert "schema: migration" in healthy.stdout and "up to date" in healthy.stdout
    assert "workers: 0 alive, 0 lost" in lines
    await asyncio.to_thread(pair.primary.kill)
    no_primary = run_cli("doctor", dsn=url)
    assert no_primary.returncode == 1 and "problem: no host accepts writes" in no_primary.stdout
    assert any(line.startswith(f"{pair.primary.host}  down") for line in no_primary.stdout.splitlines())
    await asyncio.to_thread(pair.standby.promote)
    promoted = run_cli("doctor", dsn=url)
    assert f"{pair.standby.host}  primary  accepts writes" in promoted.stdout.splitlines()
    assert promoted.returncode == 1 and f"problem: {pair.primary.host} does not answer" in promoted.stdout


async def test_the_api_loses_no_accepted_job_through_a_failover(pair: Pair) -> None:
    """`jobdesk api` on the two-host URL, posting jobs while the primary is killed and the
    standby promoted: every job answered 2xx is on the new primary; the others got 503."""
    url = pair.url()
    assert run_cli("migrate", dsn=url).returncode == 0
    port = free_port()
    proc = subprocess.Popen([*JOBDESK, "api", "--no-auth", "--port", str(port)], env=cli_env(url), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    accepted: list[str] = []
    refused: Counter[int] = Counter()
    stop = asyncio.Event()

    async def post(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            try:
                answer = await client.post("/api/jobs", json={"type": "echo", "input_data": {}})
            except httpx.HTTPError:
                refused[0] += 1
                await asyncio.sleep(0.05)
                continue
            if answer.status_code < 300:
                accepted.append(answer.json()["id"])
            else:
                refused[answer.status_code] += 1
                await asyncio.sleep(0.05)

    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/healthz")).status_code == 200:
                        break
                assert proc.poll() is None and time.monotonic() < deadline, "the API did not start"
                await asyncio.sleep(0.1)
            posters = [asyncio.create_task(post(client)) for _ in range(4)]
            while len(accepted) < 200:
                await asyncio.sleep(0.02)
            await asyncio.to_thread(pair.primary.kill)
            killed_at = len(accepted)
            await asyncio.sleep(1)
            await asyncio.to_thread(pair.standby.promote)
            deadline = time.monotonic() + 30
            while len(accepted) < killed_at + 200:
                assert time.monotonic() < deadline, f"the API did not recover ({dict(refused)})"
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.gather(*posters)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    assert set(refused) <= {0, 503}, refused
    assert "Traceback" not in output, output
    # One line when the database went away, one when it was back (and the listener's own pair).
    assert output.count("is unreachable") == 1 and output.count("is reachable again") == 1, output
    conn = await asyncpg.connect(pair.standby.dsn())
    try:
        found = await conn.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[])", accepted)
    finally:
        await conn.close()
    assert found == len(set(accepted)), "every job answered 2xx is on the new primary"
