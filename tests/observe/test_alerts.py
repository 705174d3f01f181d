"""Admin alerts reach a real HTTP endpoint through apprise's json:// URL; bursts become a digest."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from jobdesk.core.models import Job, ProcessorResult
from jobdesk.core.processor import BaseProcessor
from tests.helpers import Inbox, RunningWorker, assert_no_job_lost, wait_for


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    box = Inbox()
    yield box
    box.close()


class Broken(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        raise ValueError(f"cannot render {job.input_data.get('n')}")


async def test_a_job_failing_for_good_alerts_the_admins(dsn: str, conn: asyncpg.Connection, inbox: Inbox) -> None:
    job_id = await conn.fetchval("INSERT INTO jobs (type, input_data, pipeline_id) "
                                 "VALUES ('broken', '{\"n\": 7}', 'pipe-9') RETURNING id")
    worker = RunningWorker(dsn, {"broken": Broken()}, JOB_RETRY_INTERVALS=[0.05], JOB_ALERT_URLS=[inbox.url])
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'failed' FROM jobs WHERE id = $1", job_id),
                       what="the job to fail")
        await wait_for(lambda: _async(inbox.messages), what="the alert")
    finally:
        await worker.stop()
    [message] = inbox.messages
    text = message["title"] + "\n" + message["message"]
    for needle in (job_id, "broken", "pipe-9", "user 1", "attempts 2", "ValueError: cannot render 7"):
        assert needle in text, (needle, text)
    assert message["type"] == "failure"


async def _async(value: Any) -> Any:
    return value


async def test_fifty_failures_at_once_make_one_digest(dsn: str, conn: asyncpg.Connection, inbox: Inbox) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'broken', jsonb_build_object('n', g) "
                       "FROM generate_series(1, 50) g")
    worker = RunningWorker(dsn, {"broken": Broken()}, JOB_RETRY_INTERVALS=[], JOB_ALERT_URLS=[inbox.url],
                           JOB_ALERT_DIGEST_SECONDS=1.0, MAX_CONCURRENT_JOBS=50)
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 50 FROM jobs WHERE status = 'failed'"),
                       what="every job to fail")
        await wait_for(lambda: _async(any("digest" in m["title"] for m in inbox.messages)), timeout=10,
                       what="the digest")
    finally:
        await worker.stop()
    singles = [m for m in inbox.messages if "digest" not in m["title"]]
    digests = [m for m in inbox.messages if "digest" in m["title"]]
    assert len(singles) == 5, "the first few go out at once"
    assert len(digests) == 1 and digests[0]["title"] == "jobdesk: 45 alerts (digest)"
    assert "... and 25 more" in digests[0]["message"]
    await assert_no_job_lost(conn, 50)


async def test_an_unreachable_alert_url_does_not_stop_the_worker(dsn: str, conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data) VALUES ('broken', '{}'), ('echo', '{}')")
    from jobdesk.processors.builtin import EchoProcessor

    worker = RunningWorker(dsn, {"broken": Broken(), "echo": EchoProcessor()}, JOB_RETRY_INTERVALS=[],
                           JOB_ALERT_URLS=["json://127.0.0.1:1/nowhere"])
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 2 FROM jobs WHERE status IN ('failed', 'completed')"),
                       what="both jobs to end")
    finally:
        await worker.stop()
    assert worker.worker.alerts.delivered == 0
    await assert_no_job_lost(conn, 2)
