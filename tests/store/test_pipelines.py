"""Pipelines: the list with derived status and progress, the graph, and pipeline-wide actions."""

from __future__ import annotations

import asyncpg
import pytest

from jobdesk.core.errors import IllegalTransition, JobNotFound
from jobdesk.core.models import JobCreate
from jobdesk.store import transitions
from jobdesk.store.pipelines import (
    PipelineFilter,
    PipelineStatus,
    fetch_graph,
    fetch_pipeline_rows,
    fetch_pipelines,
    pipelines_of,
)

ACTOR = transitions.Actor("api", "tester")


async def diamond(conn: asyncpg.Connection, pipeline_id: str, name: str | None = None) -> list[str]:
    """a -> (b, c) -> d, all in one pipeline."""
    a = JobCreate("stage.a", {"name": name} if name else {}, pipeline_id=pipeline_id)
    b = JobCreate("stage.b", {}, dependent_on_jobs=[a.id], pipeline_id=pipeline_id)
    c = JobCreate("stage.c", {}, dependent_on_jobs=[a.id], pipeline_id=pipeline_id)
    d = JobCreate("stage.d", {}, dependent_on_jobs=[b.id, c.id], pipeline_id=pipeline_id)
    await transitions.enqueue(conn, [a, b, c, d])
    return [a.id, b.id, c.id, d.id]


async def set_status(conn: asyncpg.Connection, status: str, *ids: str) -> None:
    await conn.execute("UPDATE jobs SET status = $1::text, "
                       "completed_at = CASE WHEN $1::text = 'completed' THEN now() END "
                       "WHERE id = ANY($2::text[])", status, list(ids))


async def test_list_derives_status_progress_and_name_newest_first(conn: asyncpg.Connection) -> None:
    p1 = await diamond(conn, "p-1", name="nightly report")
    p2 = await diamond(conn, "p-2")
    p3 = await diamond(conn, "p-3")
    p4 = await diamond(conn, "p-4")
    p5 = await diamond(conn, "p-5")
    await conn.execute("INSERT INTO jobs (id, type, input_data) VALUES ('loose', 'echo', '{}')")  # not in a pipeline
    await set_status(conn, "completed", *p1)
    await set_status(conn, "completed", p2[0])
    await set_status(conn, "failed", p2[1])
    await set_status(conn, "completed", p3[0])
    await set_status(conn, "waiting_approval", p3[1])
    await set_status(conn, "completed", p4[0])
    await set_status(conn, "cancelled", p4[1], p4[3])
    await set_status(conn, "completed", p4[2])
    await set_status(conn, "in_progress", p5[0])

    rows, more = await fetch_pipelines(conn, PipelineFilter())
    assert not more
    by_id = {r.pipeline_id: r for r in rows}
    assert [r.pipeline_id for r in rows] == ["p-5", "p-4", "p-3", "p-2", "p-1"]
    assert by_id["p-1"].status == PipelineStatus.COMPLETED and by_id["p-1"].name == "nightly report"
    assert (by_id["p-1"].completed, by_id["p-1"].total) == (4, 4) and by_id["p-1"].finished
    assert by_id["p-2"].status == PipelineStatus.FAILED and by_id["p-2"].name == "stage.a"
    assert by_id["p-3"].status == PipelineStatus.WAITING_APPROVAL
    assert by_id["p-4"].status == PipelineStatus.CANCELLED and by_id["p-4"].finished
    assert by_id["p-5"].status == PipelineStatus.RUNNING and not by_id["p-5"].finished
    assert (by_id["p-4"].completed, by_id["p-4"].total) == (2, 4)

    # Server-side filters and keyset pages.
    failed, _ = await fetch_pipelines(conn, PipelineFilter(statuses=frozenset({PipelineStatus.FAILED})))
    assert [r.pipeline_id for r in failed] == ["p-2"]
    # Running and waiting pipelines are found through their active jobs; pages work there too.
    moving = PipelineFilter(statuses=frozenset({PipelineStatus.RUNNING, PipelineStatus.WAITING_APPROVAL}))
    rows, _ = await fetch_pipelines(conn, moving)
    assert [r.pipeline_id for r in rows] == ["p-5", "p-3"]
    rows, more = await fetch_pipelines(conn, moving, limit=1)
    assert more and [r.pipeline_id for r in rows] == ["p-5"]
    rows, more = await fetch_pipelines(conn, moving, after_seq=rows[0].head_seq, limit=1)
    assert not more and [r.pipeline_id for r in rows] == ["p-3"]
    found, _ = await fetch_pipelines(conn, PipelineFilter(search="NIGHTLY"))
    assert [r.pipeline_id for r in found] == ["p-1"]
    page1, more = await fetch_pipelines(conn, PipelineFilter(), limit=2)
    assert more and [r.pipeline_id for r in page1] == ["p-5", "p-4"]
    page2, _ = await fetch_pipelines(conn, PipelineFilter(), after_seq=page1[-1].head_seq, limit=2)
    assert [r.pipeline_id for r in page2] == ["p-3", "p-2"]

    # Live updates: the pipelines of changed jobs, re-read and re-filtered.
    assert await pipelines_of(conn, [p2[1], p5[0], "loose"]) == {"p-2", "p-5"}
    again = await fetch_pipeline_rows(conn, ["p-2", "p-5"], PipelineFilter(statuses=frozenset({PipelineStatus.FAILED})))
    assert [r.pipeline_id for r in again] == ["p-2"]


async def test_graph_has_every_job_and_its_edges(conn: asyncpg.Connection) -> None:
    a, b, c, d = await diamond(conn, "p-g")
    nodes, more = await fetch_graph(conn, "p-g")
    assert not more
    assert [n.id for n in nodes] == [a, b, c, d]
    assert {n.id: set(n.depends_on) for n in nodes} == {a: set(), b: {a}, c: {a}, d: {b, c}}
    nodes, more = await fetch_graph(conn, "p-g", limit=3)
    assert more and len(nodes) == 3


async def test_retry_failed_and_downstream_requeues_the_cascade(conn: asyncpg.Connection) -> None:
    a, b, c, d = await diamond(conn, "p-r")
    await set_status(conn, "completed", a)
    await conn.execute("UPDATE jobs SET status = 'failed', error_message = 'boom', retry_count = 3 WHERE id = $1", b)
    await transitions.cancel(conn, [c], ACTOR)  # cascades to d
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", d) == "cancelled"

    plan = await transitions.retry_plan(conn, [b])
    assert [r["id"] for r in plan] == [b, d]  # c is not downstream of b
    retried = await transitions.retry_downstream(conn, [b], ACTOR)
    assert sorted(retried) == sorted([b, d])
    rows = {r["id"]: r for r in await conn.fetch("SELECT id, status, pending_deps, retry_count FROM jobs")}
    assert rows[b]["status"] == "queued" and rows[b]["retry_count"] == 0
    assert rows[d]["status"] == "queued" and rows[d]["pending_deps"] == 2  # still waits for b and c
    assert rows[c]["status"] == "cancelled"

    with pytest.raises(IllegalTransition, match="queued"):
        await transitions.retry_downstream(conn, [b], ACTOR)


async def test_cancel_pipeline_cancels_what_is_left(conn: asyncpg.Connection) -> None:
    a, b, c, d = await diamond(conn, "p-c")
    await set_status(conn, "completed", a)
    await set_status(conn, "in_progress", b)
    cancelled = await transitions.cancel_pipeline(conn, "p-c", ACTOR)
    assert sorted(cancelled) == sorted([b, c, d])
    rows = {r["id"]: (r["status"], r["is_active"]) for r in await conn.fetch("SELECT id, status, is_active FROM jobs")}
    assert rows[a] == ("completed", True)
    assert rows[b] == ("in_progress", False)  # its worker stops it
    assert rows[c] == ("cancelled", False) and rows[d] == ("cancelled", False)
    assert await conn.fetchval("SELECT action FROM audit_log ORDER BY id DESC LIMIT 1") == "cancel"

    with pytest.raises(IllegalTransition, match="no unfinished job"):
        await transitions.cancel_pipeline(conn, "p-c", ACTOR)
    with pytest.raises(JobNotFound, match="no pipeline"):
        await transitions.cancel_pipeline(conn, "nope", ACTOR)


@pytest.mark.parametrize("candidates_max", [0, 10_000], ids=["walk every pipeline", "start from the jobs"])
async def test_failed_and_cancelled_filters_either_way(conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch,
                                                       candidates_max: int) -> None:
    from jobdesk.store import pipelines as pipeline_queries

    monkeypatch.setattr(pipeline_queries, "CANDIDATES_MAX", candidates_max)
    failed = await diamond(conn, "p-f")
    cancelled = await diamond(conn, "p-c")
    mixed = await diamond(conn, "p-m")  # a cancelled job, but still running elsewhere
    await diamond(conn, "p-ok")
    await set_status(conn, "failed", failed[1])
    await set_status(conn, "completed", cancelled[0], cancelled[1], cancelled[2])
    await set_status(conn, "cancelled", cancelled[3], mixed[1])
    await set_status(conn, "in_progress", mixed[2])
    for statuses, expected in (({PipelineStatus.FAILED}, ["p-f"]), ({PipelineStatus.CANCELLED}, ["p-c"]),
                               ({PipelineStatus.FAILED, PipelineStatus.RUNNING}, ["p-ok", "p-m", "p-f"])):
        rows, _ = await fetch_pipelines(conn, PipelineFilter(statuses=frozenset(statuses)))
        assert [r.pipeline_id for r in rows] == expected, statuses
