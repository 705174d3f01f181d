"""The console's side of durable processors, against a real PostgreSQL and a real in-process
worker running tests/durable_processors.py: the detail pane's steps and suspension reasons, the
timeline's suspensions and step marks, the DAG's edges to spawned children, and Retry from
scratch, which forgets a job's stored steps."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

from jobdesk.console.jobs import job_actions
from jobdesk.console.jobs.attempt_timeline import RUN, SUSPEND, SUSPENDED, WAIT, AttemptTimeline, marks, segments
from jobdesk.console.jobs.job_table_model import COL_STATUS
from jobdesk.console.jobs.step_list import COL_RESULT, COL_STEP, compact
from jobdesk.console.main_window import MainWindow
from jobdesk.core.models import JobCreate, Status
from jobdesk.service.jobs import JobService
from jobdesk.store.durable import StepRow
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_attempt_timeline import at, attempt, job, shape
from tests.desktop.test_console import open_window, test_db  # noqa: F401
from tests.durable_processors import PROCESSOR_MAP
from tests.helpers import RunningWorker, wait_for

PROCESSORS = {name: cls() for name, cls in PROCESSOR_MAP.items()}


def suspended(n: int, start: float, end: float, why: str) -> Any:
    a = attempt(n, start, end, SUSPENDED)
    return type(a)(a.attempt, a.worker_id, a.started_at, a.finished_at, SUSPENDED, why, None)


def test_a_suspension_is_its_own_segment_and_steps_are_marks() -> None:
    # Ran 2-4 s and slept until 20 s, then ran again and completed.
    record = job("completed", started_at=at(20), completed_at=at(21), attempts=2)
    got = segments(record, [suspended(1, 2, 4, "sleeping")], now=at(30))
    assert shape(got) == [(WAIT, 1, 0, 2, "", False), (RUN, 1, 2, 4, SUSPENDED, False),
                          (SUSPEND, 2, 4, 20, "sleeping", False), (RUN, 2, 20, 21, "completed", False)]
    assert got[2].describe() == "attempt 2: suspended, sleeping, 16.0s"
    # Still asleep: the suspension reaches the wake time, not just now.
    asleep = segments(job("queued", attempts=1), [suspended(1, 2, 4, "sleeping")], now=at(10), wake_at=at(60))
    assert shape(asleep)[-1] == (SUSPEND, 2, 4, 60, "sleeping", True)
    # Waiting for an event with no timeout: up to now.
    waiting = segments(job("queued", attempts=1), [suspended(1, 2, 4, "waiting for event k")], now=at(10))
    assert shape(waiting)[-1] == (SUSPEND, 2, 4, 10, "waiting for event k", True)
    steps = [StepRow("@sleep 1", None, 1, at(3), at(4), 1.0), StepRow("fetch", {"n": 1}, 1, at(2), at(3), 1.0)]
    got_marks = marks(steps)
    assert [(m.name, m.checkpoint) for m in got_marks] == [("fetch", False), ("@sleep 1", True)]
    assert got_marks[1].describe() == "attempt 1: checkpoint @sleep 1 finished"


def test_the_widget_puts_each_mark_on_its_run(qtbot) -> None:  # type: ignore[no-untyped-def]
    widget = AttemptTimeline()
    qtbot.addWidget(widget)
    widget.resize(400, 70)
    record = job("completed", started_at=at(20), completed_at=at(30), attempts=2)
    steps = [StepRow("one", 1, 1, at(2), at(3), 1.0), StepRow("@sleep 1", None, 1, at(3), at(4), 0.0),
             StepRow("two", 2, 2, at(21), at(25), 4.0)]
    widget.show_segments(segments(record, [suspended(1, 2, 4, "sleeping")], now=at(40)), marks(steps))
    runs = [rect for rect, s in widget.rects() if s.kind == RUN]
    points = widget.mark_points()
    assert [m.name for _p, m in points] == ["one", "@sleep 1", "two"]
    for (point, mark), run in zip(points, [runs[0], runs[0], runs[1]]):
        assert run.left() - 1 <= point.x() <= run.right() + 1, mark.name
    assert not widget.grab().isNull()


async def durable_jobs(dsn: str) -> dict[str, str]:
    """Run a worker until there is: a completed job with three steps, a job asleep for ten
    minutes, one waiting for an event, a parent with its spawned children, and a failed job with a
    stored step. The worker is stopped before the console opens, so nothing moves after."""
    conn = await asyncpg.connect(dsn)
    await conn.execute("CREATE TABLE step_calls (job_id text, step text, at timestamptz DEFAULT clock_timestamp())")
    service = await JobService.connect(dsn, pool_size=2)
    ids = {"steps": "d-steps", "sleep": "d-sleep", "wait": "d-wait", "parent": "d-parent", "failed": "d-failed"}
    await service.enqueue_many([
        JobCreate("durable.three_steps", {"dsn": dsn}, id=ids["steps"]),
        JobCreate("durable.sleep", {"seconds": 600}, id=ids["sleep"]),
        JobCreate("durable.wait", {"key": "upload-done:42"}, id=ids["wait"]),
        JobCreate("durable.parent", {}, id=ids["parent"]),
        JobCreate("durable.twice", {}, id=ids["failed"]),
    ])
    await service.close()
    worker = RunningWorker(dsn, PROCESSORS, JOB_RETRY_INTERVALS=[])
    try:
        await wait_for(lambda: conn.fetchval(
            "SELECT count(*) = 2 FROM job_waits w JOIN jobs j ON j.id = w.job_id AND j.status = 'queued'"
            " WHERE w.job_id = ANY($1::text[])", [ids["sleep"], ids["wait"]]), timeout=60, what="two suspended jobs")
        await wait_for(lambda: conn.fetchval(
            "SELECT count(*) = 3 FROM jobs WHERE id = ANY($1::text[]) AND status IN ('completed', 'failed')",
            [ids["steps"], ids["parent"], ids["failed"]]), timeout=60, what="the finished jobs")
    finally:
        await worker.stop()
    assert await conn.fetchval("SELECT status FROM jobs WHERE id = $1", ids["failed"]) == "failed"
    assert await conn.fetchval("SELECT count(*) FROM job_steps WHERE job_id = $1", ids["failed"]) == 1
    await conn.close()
    return ids


async def show(window: MainWindow, job_id: str) -> None:
    window.select_job(job_id)
    await until(lambda: window.detail.job_id == job_id and window.detail.title.text().find(job_id) >= 0,
                what=f"the detail of {job_id}")
    await asyncio.sleep(0)


def test_durable_jobs_in_the_console(qapp: QApplication, qtbot, test_db: str,  # type: ignore[no-untyped-def]  # noqa: F811
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    questions: list[str] = []

    def yes(_parent: object, _title: str, text: str) -> QMessageBox.StandardButton:
        questions.append(text)
        return QMessageBox.StandardButton.Yes

    monkeypatch.setattr(job_actions.QMessageBox, "question", yes)

    async def scenario() -> None:
        ids = await durable_jobs(test_db)
        window = open_window(qtbot, test_db)
        await until(lambda: window.model.rowCount() >= 8, what="the job rows")
        detail = window.detail

        # Steps: listed in the order they finished, with compact results; the last one's full value below.
        await show(window, ids["steps"])
        table = detail.steps
        assert [table.item(r, COL_STEP).text() for r in range(table.rowCount())] == ["one", "two", "three"]
        assert table.item(2, COL_RESULT).text() == compact([1, {"two": 2}, 3]) == '[1,{"two":2},3]'
        assert detail.tabs.tabText(detail.tabs.indexOf(detail.steps_box)) == "Steps (3)"
        assert detail.step_result.raw.toPlainText().startswith("[\n  1,")
        table.selectRow(1)
        assert '"two": 2' in detail.step_result.raw.toPlainText()
        assert [m.name for m in detail.timeline.marks] == ["one", "two", "three"]

        # A sleeping job: its reason and its status say so; the timeline ends in a suspension.
        await show(window, ids["sleep"])
        assert detail.meta_labels["Waiting"].text().startswith("sleeping until ")
        assert "suspended: sleeping" in detail.meta_labels["Status"].text()
        kinds = [(s.kind, s.outcome) for s in detail.timeline.segments]
        assert (RUN, SUSPENDED) in kinds and kinds[-1] == (SUSPEND, "sleeping")
        last = detail.timeline.segments[-1]
        assert last.open_ended and last.end > datetime.now(UTC) + timedelta(minutes=8), "it ends at the wake time"
        names = [table.item(r, COL_STEP).text() for r in range(table.rowCount())]
        assert names == ["@sleep 1"], "the sleep's checkpoint is listed"
        assert table.item(0, COL_STEP).font().italic(), "muted"
        assert '"until"' in detail.step_result.raw.toPlainText(), "the checkpoint's value, not the last job's"
        assert [m.checkpoint for m in detail.timeline.marks] == [True]

        # The job table says which queued jobs are suspended, and until when when they have a time.
        status_of = {window.model.row_at(r).id: window.model.index(r, COL_STATUS).data()  # type: ignore[union-attr]
                     for r in range(window.model.rowCount())}
        assert status_of[ids["sleep"]].startswith("suspended · in ")
        assert status_of[ids["wait"]] == "suspended"

        await show(window, ids["wait"])
        assert detail.meta_labels["Waiting"].text() == "waiting for event upload-done:42"
        assert "suspended: waiting for an event" in detail.meta_labels["Status"].text()

        # The parent's DAG: an edge to each spawned child, drawn as a spawned edge.
        await show(window, ids["parent"])
        window.show_pipeline_graph(ids["parent"])
        dag = window.pipelines.dag
        await until(lambda: len(dag.nodes) == 4, what="the parent and its three children")
        children = [n for n, item in dag.nodes.items() if item.node.spawned_by == ids["parent"]]
        assert len(children) == 3
        assert sorted(dag.spawned_edges) == sorted((ids["parent"], c) for c in children)
        assert set(dag.spawned_edges) <= set(dag.edges)
        x_parent = dag.nodes[ids["parent"]].pos().x()
        assert all(dag.nodes[c].pos().x() > x_parent for c in children), "children are drawn after the parent"

        # Retry from scratch: asked first, then the job is queued with no stored steps.
        window.tabs.setCurrentWidget(window.jobs)
        await show(window, ids["failed"])
        # The row is selected once the table holds it (a live refresh may be reloading its page).
        actions = window.job_actions
        try:
            await until(lambda: window.jobs.select_job(ids["failed"])
                        and actions.actions["retry_fresh"].isEnabled(), what="Retry from scratch")
        except AssertionError as exc:
            state = {"selection": [(r.id, r.status) for r in actions.selection], "connected": actions.connected,
                     "busy": actions.busy, "read_only": actions.read_only,
                     "tab": window.tabs.tabText(window.tabs.currentIndex()),
                     "rows": [window.model.row_at(i).id for i in range(window.model.rowCount())  # type: ignore[union-attr]
                              if window.model.row_at(i) is not None]}
            raise AssertionError(f"{exc}: {state}") from None
        window.job_actions.actions["retry_fresh"].trigger()
        conn = await asyncpg.connect(test_db)
        try:
            await wait_for(lambda: conn.fetchval("SELECT status = 'queued' FROM jobs WHERE id = $1", ids["failed"]),
                           what="the retry")
            assert await conn.fetchval("SELECT count(*) FROM job_steps WHERE job_id = $1", ids["failed"]) == 0
        finally:
            await conn.close()
        assert questions == ["Retry 1 job(s) from scratch? Their stored steps are forgotten, so every step "
                             "runs again."]
        await until(lambda: window.model.row_at(0) is not None and any(
            window.model.row_at(i).status == Status.QUEUED and window.model.row_at(i).id == ids["failed"]  # type: ignore[union-attr]
            for i in range(window.model.rowCount())), what="the table shows the retry")
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=150)
