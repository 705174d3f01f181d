"""The demo pipeline's render stage as a durable processor, on a real worker: its steps, its
sleep and its wait for the fake upload service's event."""

from __future__ import annotations

import asyncpg

from jobdesk.processors.demo_video import PROCESSOR_MAP as DEMO_MAP
from jobdesk.processors.demo_video import demo_pipeline
from jobdesk.store import durable, transitions
from tests.helpers import RunningWorker, wait_for


async def test_render_stage_suspends_and_resumes_in_fast_mode(conn: asyncpg.Connection, dsn: str) -> None:
    first = demo_pipeline("tests", duration_scale=0.1, fail_rate=0, approval=False)  # as `jobdesk demo --fast`
    await transitions.enqueue(conn, [first])
    worker = RunningWorker(dsn, {t: cls() for t, cls in DEMO_MAP.items()})
    try:
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 5 AND bool_and(status = 'completed') FROM jobs"),
                       timeout=60, what="the demo to finish")
    finally:
        await worker.stop()
    render = await conn.fetchrow("SELECT id, attempts, result_data FROM jobs WHERE type = 'video.render'")
    suspensions = await conn.fetch("SELECT error_message FROM job_attempts WHERE job_id = $1 AND outcome = 'suspended'"
                                   " ORDER BY attempt", render["id"])
    assert suspensions and suspensions[0]["error_message"] == "sleeping"
    assert render["attempts"] == len(suspensions) + 1

    steps = {s.name: s for s in await durable.steps_of(conn, render["id"])}
    assert set(steps) == {"generate", "@sleep 1", "upload", "@event 1"}
    assert steps["generate"].attempt == 1  # the paid API was called once, though the stage ran again
    key = f"upload-done:{render['id']}"
    url = f"https://cdn.example.com/{first.id}/draft.mp4"
    assert steps["upload"].result == {"upload_key": key, "url": url}
    assert steps["@event 1"].result == {"key": key, "payload": {"url": url}}
    assert render["result_data"]["url"] == url and render["result_data"]["cost_usd"] == 0.42
