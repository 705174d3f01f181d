"""GET /api/jobs/{id} answers with JSON that PostgreSQL writes (worker.job_document): the same
document, key for key and in the same order, as the routes that render in Python."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from jobdesk.api.render import detail_json, job_json
from jobdesk.core.errors import JobNotFound
from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from tests.api.conftest import Api

WORKER = "w-doc"


async def _claim(conn: asyncpg.Connection, job_type: str) -> transitions.Job:
    _, jobs = await transitions.complete_and_claim(conn, WORKER, [job_type], 1)
    return jobs[0]


async def _jobs_in_every_state(api: Api) -> list[str]:
    """A job in each state the route answers about, with the values that are easy to write wrong:
    text to escape, nested and non-ASCII JSON, whole-second timestamps, attempts with tracebacks."""
    svc = api.service
    later = datetime.now(UTC) + timedelta(hours=1)
    ids = await svc.enqueue_many([
        JobCreate("doc.done", {"text": "naïve \"quoted\" \\ back\nslash\ttab", "n": [1, 2.5, None, True],
                               "nested": {"b": {"attempts": 1}, "a": "ü€😀"}}, pipeline_id="p-doc", priority=3,
                  unique_key="k-doc", user_id=2),
        JobCreate("doc.fail", {}),
        JobCreate("doc.retry", {}),
        JobCreate("doc.later", {}, scheduled_at=later),
        JobCreate("doc.cancel", {}),
        JobCreate("doc.approve", {}),
    ])
    done, fail, retry, later_id, cancel, approve = ids
    [child] = await svc.enqueue_many([JobCreate("doc.child", {}, dependent_on_jobs=[later_id, done])])
    async with svc.pool.acquire() as conn:
        job = await _claim(conn, "doc.done")
        await transitions.complete_and_claim(conn, WORKER, [], 0, [(job, transitions.ProcessorResult(
            {"out": "résumé", "list": [{"k": "v"}]}))])
        for attempt in range(2):
            job = await _claim(conn, "doc.fail")
            await transitions.fail_attempt(conn, WORKER, job, f"ValueError: bad \"row\" {attempt}\nsecond line",
                                           "Traceback (most recent call last):\n  File \"x.py\"\n\tValueError",
                                           intervals=[0])
        job = await _claim(conn, "doc.retry")
        await transitions.fail_attempt(conn, WORKER, job, "TimeoutError: took 31 s", None, intervals=[3600])
        job = await _claim(conn, "doc.approve")
        await transitions.complete_batch(conn, WORKER, [(job, transitions.ProcessorResult(
            {"draft": 1}, requires_approval=True))])
        # Whole seconds: isoformat leaves the fraction out then, and so must the document.
        await conn.execute("UPDATE jobs SET created_at = date_trunc('second', created_at) WHERE id = $1", done)
        # Progress: a fraction, a message to escape, whole seconds, and microseconds that end in a 0
        # (isoformat writes all six digits); none on the others.
        await conn.execute("INSERT INTO job_progress (job_id, fraction, message, at) VALUES "
                           "($1, 0.4, 'naïve \"40\" of 100', date_trunc('second', now())), "
                           "($2, 1, NULL, '2026-12-06 07:15:50.20577+00')", done, fail)
    await svc.cancel([cancel])
    return [*ids, child]


async def test_the_document_is_the_detail_rendered_in_python(api: Api) -> None:
    ids = await _jobs_in_every_state(api)
    statuses = set()
    for job_id in ids:
        detail = await api.service.job_detail(job_id)
        statuses.add(str(detail.job.status))
        expected = detail_json(detail)
        text = await api.service.job_detail_json(job_id)
        got = json.loads(text)
        assert list(got) == list(expected), job_id  # the same keys, in the same order
        assert got == expected, job_id
        for key in ("created_at", "updated_at", "completed_at", "started_at", "next_retry_at", "scheduled_at"):
            assert got[key] == expected[key], (job_id, key)  # the same text, not only the same instant
        answer = await api.client.get(f"/api/jobs/{job_id}")
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        assert answer.json() == expected
    assert statuses == {"completed", "failed", "queued", "cancelled", "waiting_approval"}
    reasons = {json.loads(await api.service.job_detail_json(j))["waiting_reason"] for j in ids}
    assert any(r and r.startswith("retrying at") for r in reasons), reasons
    assert any(r and r.startswith("scheduled for") for r in reasons), reasons
    assert any(r and r.startswith("waiting for 1 ") for r in reasons), reasons


async def test_another_users_job_is_not_found_as_an_unknown_one_is(api: Api) -> None:
    [mine] = await api.service.enqueue_many([JobCreate("doc.user", {}, user_id=2)])
    for path, token in ((f"/api/jobs/{mine}", "bob"), ("/api/jobs/nope", "alice")):
        answer = await api.client.get(path, headers=api.auth(token))
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found", answer.text
    assert (await api.client.get(f"/api/jobs/{mine}", headers=api.auth("alice"))).json()["id"] == mine
    bob = api.service.as_actor(transitions.Actor.current("api"), user_id=3)
    with pytest.raises(JobNotFound):
        await bob.job_detail_json(mine)


async def test_one_group_read_answers_each_reader_in_its_own_scope(api: Api) -> None:
    """Concurrent polls share one read (jobdesk.api.batcher): each still sees only what its
    token's scope shows it, as when it reads alone."""
    svc = api.service
    alices, queued = await svc.enqueue_many([JobCreate("doc.user", {}, user_id=2), JobCreate("doc.queued", {})])
    actor = transitions.Actor.current("api")
    alice, bob = svc.as_actor(actor, user_id=2), svc.as_actor(actor, user_id=3)
    reads = [(alice, alices), (bob, alices), (svc, alices), (svc, "nope"), (alice, queued), (svc, queued),
             (svc, queued), (bob, "nope")]
    answers = await svc.job_details_json(reads)
    for (reader, job_id), answer in zip(reads, answers, strict=True):
        try:
            alone: str | JobNotFound = await reader.job_detail_json(job_id)
        except JobNotFound as exc:
            alone = exc
        if isinstance(alone, JobNotFound):
            assert isinstance(answer, JobNotFound) and str(answer) == str(alone), (reader.user_id, job_id)
        else:
            assert isinstance(answer, str) and json.loads(answer) == json.loads(alone), (reader.user_id, job_id)
    assert [isinstance(a, str) for a in answers] == [True, False, True, False, False, True, True, False]
    assert json.loads(answers[5])["waiting_reason"].startswith("no live worker serves")

    # Through the route, many polls at once from three tokens: each gets its own answer.
    import asyncio
    tokens = ["alice", "bob", "admin"] * 10
    resps = await asyncio.gather(*(api.client.get(f"/api/jobs/{alices}", headers=api.auth(t)) for t in tokens))
    assert [r.status_code for r in resps] == [200, 404, 200] * 10
    assert {r.json()["id"] for r in resps if r.status_code == 200} == {alices}


async def test_the_enqueue_answer_is_the_job_rendered_in_python(api: Api) -> None:
    """POST /api/jobs answers with the job as PostgreSQL writes it (`fetch_job_texts`), then
    `duplicate` and `warnings`: the same keys, order and timestamp text as `job_json` writes."""
    bodies = [
        ({"type": "doc.post", "input_data": {"text": "naïve \"q\" \\ ü€😀", "n": [1, 2.5, None]}}, False),
        ({"type": "doc.post", "input_data": {}, "priority": 4, "pipeline_id": "p-post", "user_id": 2,
          "scheduled_at": "2031-05-06T07:08:09.123456+02:00", "unique_key": "k-post"}, False),
        ({"type": "doc.post", "input_data": {}, "unique_key": "k-post"}, True),  # the one before holds the key
        ({"type": "doc.post", "input_data": {}, "scheduled_at": "2031-05-06T07:08:09+02:00"}, False),  # whole
    ]
    for body, duplicate in bodies:
        answer = await api.client.post("/api/jobs", json=body)
        assert answer.status_code == (200 if duplicate else 201), answer.text
        got = answer.json()
        expected = {**job_json(await api.service.get_job(got["id"])), "duplicate": duplicate, "warnings": []}
        assert list(got) == list(expected), body
        assert got == expected, body
    assert got["scheduled_at"] == "2031-05-06T05:08:09+00:00"
