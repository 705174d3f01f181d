"""`jobdesk worker --metrics-port`: a real worker's Prometheus endpoint, scraped after it ran jobs."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import asyncpg
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import free_port, run_cli, start_worker, wait_for

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def of(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


async def test_metrics_count_jobs_by_type(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    await conn.execute("""
        INSERT INTO jobs (type, input_data, created_at) VALUES
            ('echo', '{}', now()), ('echo', '{}', now()), ('echo', '{}', now() - interval '100 seconds'),
            ('test.fail', '{}', now())""")
    # A retry whose time came a second ago: its wait counts from then, not from its enqueue.
    await conn.execute("""
        INSERT INTO jobs (type, input_data, created_at, retry_count, next_retry_at)
        VALUES ('noop', '{}', now() - interval '1000 seconds', 1, now() - interval '1 second')""")
    long_job = await conn.fetchval("INSERT INTO jobs (type, input_data) VALUES ('sleep', '{\"seconds\": 30}') "
                                   "RETURNING id")
    port = free_port()
    worker = start_worker(dsn, "--processors", "cli_processors", "--metrics-port", str(port),
                          log_path=tmp_path / "worker.log", JOB_RETRY_INTERVALS="0.05", RUN_LOG=str(tmp_path / "r"),
                          JOB_PROCESSOR_POLL_INTERVAL="0.05")
    try:
        await wait_for(lambda: conn.fetchval(
            "SELECT count(*) = 5 FROM jobs WHERE status IN ('completed', 'failed')"), what="the short jobs")
        await wait_for(lambda: conn.fetchval("SELECT status = 'in_progress' FROM jobs WHERE id = $1", long_job),
                       what="the long job to start")
        running = scrape(port)
        assert of(running, "jobdesk_jobs_in_flight") == 1
        assert run_cli("cancel", long_job, dsn=dsn).returncode == 0
        await wait_for(lambda: conn.fetchval("SELECT status = 'cancelled' FROM jobs WHERE id = $1", long_job),
                       what="the long job to be cancelled")
        samples = await wait_for(lambda: _when_cancelled(port), what="the cancel to be counted")
    finally:
        worker.terminate()
        worker.wait(20)

    assert of(samples, "jobdesk_jobs_in_flight") == 0
    expected = {"echo": (3, 3, 0, 0, 0), "test.fail": (2, 0, 1, 1, 0), "noop": (1, 1, 0, 0, 0),
                "sleep": (1, 0, 0, 0, 1), "video.render": (0, 0, 0, 0, 0)}
    for job_type, counts in expected.items():
        got = tuple(of(samples, f"jobdesk_jobs_{name}_total", type=job_type)
                    for name in ("started", "completed", "failed", "retried", "cancelled"))
        assert got == counts, job_type
        assert of(samples, "jobdesk_job_run_seconds_count", type=job_type) == counts[0]
        assert of(samples, "jobdesk_job_queue_wait_seconds_count", type=job_type) == counts[0]
    # Queue wait: two echo jobs waited under a minute, the one enqueued 100 s ago did not.
    assert of(samples, "jobdesk_job_queue_wait_seconds_bucket", type="echo", le="60.0") == 2
    assert of(samples, "jobdesk_job_queue_wait_seconds_bucket", type="echo", le="300.0") == 3
    assert 100 <= of(samples, "jobdesk_job_queue_wait_seconds_sum", type="echo") < 160
    assert of(samples, "jobdesk_job_queue_wait_seconds_bucket", type="noop", le="5.0") == 1
    # Run time: the cancelled job ran about as long as the test took to cancel it.
    assert of(samples, "jobdesk_job_run_seconds_bucket", type="sleep", le="0.01") == 0
    assert of(samples, "jobdesk_job_run_seconds_bucket", type="echo", le="0.25") == 3
    assert of(samples, "jobdesk_claim_round_trips_total") >= 2
    assert of(samples, "jobdesk_db_errors_total") == 0
    assert of(samples, "jobdesk_db_reconnects_total") == 0
    assert not any("id" in dict(labels) for _, labels in samples), "no per-job label"


async def _when_cancelled(port: int) -> Samples | None:
    samples = scrape(port)
    return samples if of(samples, "jobdesk_jobs_cancelled_total", type="sleep") == 1 else None


def test_a_bad_metrics_port_is_one_line(dsn: str) -> None:
    result = run_cli("worker", "--metrics-port", "70000", dsn=dsn)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "--metrics-port" in result.stderr
    result = run_cli("migrate", dsn=dsn, JOB_METRICS_PORT="http")
    assert result.returncode == 1 and "JOB_METRICS_PORT" in result.stderr and result.stderr.count("\n") == 1
