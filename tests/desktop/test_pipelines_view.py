"""The Pipelines tab against a real PostgreSQL and a real worker, offscreen."""

from __future__ import annotations

import asyncio
import signal

import asyncpg
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from jobdesk.console import tasks
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from jobdesk.core.models import JobCreate, Status
from jobdesk.core.settings import load_settings
from jobdesk.processors.demo_video import demo_pipeline
from jobdesk.store import transitions
from jobdesk.store.pipelines import PipelineStatus
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until
from tests.helpers import start_worker

STAGES = ["video.script", "video.voice", "video.image", "video.render", "video.composite"]
EDGES = {("video.script", "video.voice"), ("video.script", "video.image"), ("video.voice", "video.render"),
         ("video.image", "video.render"), ("video.render", "video.composite")}


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def open_window(qtbot, dsn: str) -> MainWindow:  # type: ignore[no-untyped-def]
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn), embedded=False)
    window = MainWindow(connection)
    qtbot.addWidget(window)
    window.show()
    connection.start()
    return window


def graph_statuses(window: MainWindow) -> dict[str, Status]:
    return {item.node.type: item.node.status for item in window.pipelines.dag.nodes.values()}


def graph_edges(window: MainWindow) -> set[tuple[str, str]]:
    dag = window.pipelines.dag
    return {(dag.nodes[p].node.type, dag.nodes[c].node.type) for p, c in dag.edges}


def test_demo_pipeline_dag_follows_the_worker(qapp: QApplication, qtbot, qtmodeltester,  # type: ignore[no-untyped-def]
                                              test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        first = demo_pipeline("tests", duration_scale=0.15, fail_rate=0)
        await transitions.enqueue(conn, [first])
        window = open_window(qtbot, test_db)
        tab = window.pipelines
        window.tabs.setCurrentWidget(tab)
        await until(lambda: tab.model.rowCount() == 1, what="the pipeline row")
        row = tab.model.row_at(0)
        assert row is not None and row.pipeline_id == first.id and row.name == "Generate video: tests"
        assert row.status == PipelineStatus.RUNNING
        qtmodeltester.check(tab.model)
        tab.table.selectRow(0)
        await until(lambda: graph_statuses(window) == {"video.script": Status.QUEUED}, what="the first node")

        # A worker runs the pipeline; the DAG grows as the script stage creates the others, and
        # its nodes follow each stage through its statuses.
        seen: dict[str, set[Status]] = {t: set() for t in STAGES}
        show = tab.dag.set_graph

        def record(pipeline_id: str, nodes: list) -> None:  # type: ignore[type-arg]
            show(pipeline_id, nodes)
            for t, s in graph_statuses(window).items():
                seen[t].add(s)

        record(first.id, tab.graph)
        tab.dag.set_graph = record  # type: ignore[method-assign]
        worker = start_worker(test_db, JOB_PROCESSOR_POLL_INTERVAL="0.2")
        try:
            await until(lambda: graph_statuses(window).get("video.render") == Status.WAITING_APPROVAL,
                        timeout=30, what="render waiting for approval")
            assert set(graph_statuses(window)) == set(STAGES)
            assert graph_edges(window) == EDGES
            assert seen["video.script"] >= {Status.QUEUED, Status.COMPLETED}
            assert seen["video.voice"] >= {Status.COMPLETED}
            assert Status.IN_PROGRESS in set().union(*seen.values())
            await until(lambda: tab.model.row_at(0).status == PipelineStatus.WAITING_APPROVAL,  # type: ignore[union-attr]
                        what="the list's derived status")
            # Layers run left to right: script, then voice and image together, render, composite.
            x = {item.node.type: item.pos().x() for item in tab.dag.nodes.values()}
            assert x["video.script"] < x["video.voice"] == x["video.image"] < x["video.render"] < x["video.composite"]

            # The node's menu offers approve; approving lets the worker finish the pipeline.
            render = next(i.node for i in tab.dag.nodes.values() if i.node.type == "video.render")
            menu = {a.text(): a for a in tab.node_menu(render.id).actions()}
            assert menu["Approve"].isEnabled() and not menu["Retry"].isEnabled()
            assert not menu["Retry failed and downstream…"].isEnabled() and menu["Cancel pipeline…"].isEnabled()
            menu["Approve"].trigger()
            await until(lambda: set(graph_statuses(window).values()) == {Status.COMPLETED}, timeout=30,
                        what="every node completed")
            await until(lambda: tab.model.row_at(0).status == PipelineStatus.COMPLETED,  # type: ignore[union-attr]
                        what="the pipeline completed")
            assert (tab.model.row_at(0).completed, tab.model.row_at(0).total) == (5, 5)  # type: ignore[union-attr]
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(20)
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario(), timeout=90)


def test_clicks_navigation_and_pipeline_actions(qapp: QApplication, qtbot, test_db: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        a = JobCreate("stage.a", {"name": "nightly"}, pipeline_id="p-1")
        b = JobCreate("stage.b", {}, dependent_on_jobs=[a.id], pipeline_id="p-1")
        c = JobCreate("stage.c", {}, dependent_on_jobs=[b.id], pipeline_id="p-1")
        other = JobCreate("other", {}, pipeline_id="p-2")
        await transitions.enqueue(conn, [a, b, c, other])
        await conn.execute("UPDATE jobs SET status = 'completed' WHERE id = $1", a.id)
        await conn.execute("UPDATE jobs SET status = 'failed', error_message = 'boom' WHERE id = $1", b.id)
        await conn.execute("UPDATE jobs SET status = 'cancelled' WHERE id = $1", c.id)

        window = open_window(qtbot, test_db)
        tab = window.pipelines
        window.tabs.setCurrentWidget(tab)
        await until(lambda: tab.model.rowCount() == 2, what="two pipelines")
        assert tab.model.row_at(1).status == PipelineStatus.FAILED  # type: ignore[union-attr]

        # Server-side filter by derived status.
        tab.status_buttons[None].setChecked(False)
        tab.status_buttons[PipelineStatus.FAILED].setChecked(True)
        tab.apply_filter()
        await until(lambda: tab.model.rowCount() == 1 and tab.model.row_at(0).pipeline_id == "p-1",  # type: ignore[union-attr]
                    what="the failed pipeline only")
        tab.table.selectRow(0)
        await until(lambda: len(tab.dag.nodes) == 3, what="the graph")

        # A click shows the job in the detail panes; a double-click selects it in the job table.
        tab.dag.select_job(b.id)
        await until(lambda: window.detail.job_id == b.id, what="the detail pane")
        assert "boom" in window.detail.error_view.toPlainText()
        # The toolbar's actions follow the selected node on this tab.
        assert [n.id for n in window.job_actions.selection] == [b.id]
        assert window.job_actions.actions["retry"].isEnabled() and not window.job_actions.actions["cancel"].isEnabled()
        tab.dag.node_activated.emit(c.id)
        await until(lambda: window.tabs.currentIndex() == 0 and [r.id for r in window.selected_rows()] == [c.id],
                    what="the job selected in the table")
        await until(lambda: window.detail.job_id == c.id, what="the selected job in the detail pane")
        # The detail pane's "graph" link leads back to the pipeline's DAG.
        assert "graph:p-1" in window.detail.meta_labels["Pipeline"].text()
        window.detail._link("graph:p-1")
        assert window.tabs.currentWidget() is tab and tab.pipeline_id == "p-1"

        # Zoom with the wheel, fit with F.
        before = tab.dag.transform().m11()
        tab.dag.wheelEvent(QWheelEvent(QPointF(10, 10), QPointF(10, 10), QPoint(), QPoint(0, 240),
                                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                                       Qt.ScrollPhase.NoScrollPhase, False))
        assert tab.dag.transform().m11() == pytest.approx(before * 1.15 ** 2)
        qtbot.keyClick(tab.dag, Qt.Key.Key_F)
        assert tab.dag.transform().m11() <= 1.0
        assert tab.dag.focus_node().node.id == b.id  # type: ignore[union-attr]

        # "Retry failed and downstream" shows what it will touch, then retries it all.
        asked: list[str] = []
        tab.ask = lambda title, text, details="": asked.append(f"{text}\n{details}") or True  # type: ignore[method-assign]
        retried = await tab.retry_downstream(b.id)
        assert sorted(retried) == sorted([b.id, c.id])
        assert "Retry these 2 job(s)?" in asked[0] and "stage.c" in asked[0] and "stage.a" not in asked[0]
        statuses = {r["id"]: r["status"] for r in await conn.fetch("SELECT id, status FROM jobs")}
        assert statuses[b.id] == statuses[c.id] == "queued" and statuses[a.id] == "completed"
        await until(lambda: graph_statuses(window) == {"stage.a": Status.COMPLETED, "stage.b": Status.QUEUED,
                                                       "stage.c": Status.QUEUED}, what="the graph after retry")
        # The list follows: the pipeline is running now, so the "failed" filter drops it.
        await until(lambda: tab.model.rowCount() == 0, what="the pipeline leaving the failed filter")

        # Cancel pipeline cancels what is left, through the same transitions as the CLI.
        cancelled = await tab.cancel_pipeline("p-1")
        assert sorted(cancelled) == sorted([b.id, c.id])
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE pipeline_id = 'p-1' AND status = 'cancelled'") == 2
        assert await conn.fetchval("SELECT source FROM audit_log ORDER BY id DESC LIMIT 1") == "console"
        await until(lambda: set(graph_statuses(window).values()) == {Status.COMPLETED, Status.CANCELLED},
                    what="the graph after cancel")

        # The list's menu works on the whole pipeline: retry every failed or cancelled job.
        tab.status_buttons[None].click()
        await until(lambda: tab.model.row_of("p-1") is not None and tab.model.row_at(  # type: ignore[union-attr]
            tab.model.row_of("p-1")).status == PipelineStatus.CANCELLED, what="the cancelled pipeline row")
        menu = {a.text(): a for a in tab.pipeline_menu("p-1").actions()}
        assert menu["Retry failed and downstream…"].isEnabled() and not menu["Cancel pipeline…"].isEnabled()
        asked.clear()
        assert sorted(await tab.retry_pipeline("p-1")) == sorted([b.id, c.id])
        assert "Retry these 2 job(s)?" in asked[0]
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE pipeline_id = 'p-1' AND status = 'queued'") == 2
        assert await tab.retry_pipeline("p-2") == []  # nothing failed there: a message, no question
        assert len(asked) == 1
        # Let the reads the actions above set off finish while the tab is shown: a read already
        # in flight when the tab hides may still land, and would count as a query made hidden.
        await asyncio.sleep(0.6)
        await until(lambda: tab.model._loading is None and not tab._graph_loading
                    and not any(t.get_name().startswith("pipeline") for t in tasks._running),
                    what="the pipeline tab idle")
        menu["Show its jobs in the job table"].trigger()
        assert window.tabs.currentIndex() == 0 and window.jobs.pipeline_edit.text() == "p-1"

        # While the tab is hidden, changes cost no pipeline queries; it catches up when shown.
        rows_before = tab.model.rowCount()
        await transitions.enqueue(conn, [JobCreate("later", {}, pipeline_id="p-3")])
        await until(lambda: tab.gate.stale, what="the hidden tab marked stale")
        await asyncio.sleep(0.6)  # past the 250 ms coalescing of pushed changes
        assert tab.model.rowCount() == rows_before
        assert not tab._clock.isActive() and not tab.dag.clock.isActive(), "no clocks tick while hidden"
        window.tabs.setCurrentWidget(tab)
        assert tab._clock.isActive() and tab.dag.clock.isActive()
        await until(lambda: tab.model.row_of("p-3") == 0, what="the new pipeline once the tab is shown")
        await conn.close()
        window.close()
        await window.connection.close()

    run_qasync(qapp, scenario())


def test_dag_view_pans_by_dragging_and_follows_the_running_job(qapp: QApplication, qtbot) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from jobdesk.console.pipelines.dag_view import DagView
    from jobdesk.store.pipelines import GraphNode

    now = datetime.now(UTC)

    def chain(running: int) -> list[GraphNode]:
        """40 jobs in a row, completed up to `running`, which runs; the rest are queued."""
        return [GraphNode(id=f"j{i}", type=f"stage.{i}",
                          status=Status.COMPLETED if i < running else Status.IN_PROGRESS if i == running
                          else Status.QUEUED, attempts=1 if i <= running else 0, retry_count=0,
                          depends_on=[f"j{i - 1}"] if i else [], created_at=now,
                          started_at=now if i <= running else None, completed_at=now if i < running else None,
                          updated_at=now, seq=i)
                for i in range(40)]

    view = DagView()
    qtbot.addWidget(view)
    view.resize(800, 400)
    view.show()
    view.set_graph("p", chain(5))
    view.resetTransform()

    def centre_x() -> float:
        return view.mapToScene(view.viewport().rect().center()).x()

    def node_x(job_id: str) -> float:
        return view.nodes[job_id].sceneBoundingRect().center().x()

    qtbot.keyClick(view, Qt.Key.Key_C)
    assert abs(centre_x() - node_x("j5")) < 5

    # Dragging the background pans the view.
    before = view.horizontalScrollBar().value()
    start = view.mapFromScene(QPointF(node_x("j5"), -30))
    qtbot.mousePress(view.viewport(), Qt.MouseButton.LeftButton, pos=start)
    for step in range(1, 6):
        qtbot.mouseMove(view.viewport(), QPoint(start.x() - 40 * step, start.y()))
    qtbot.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(start.x() - 200, start.y()))
    assert view.horizontalScrollBar().value() > before

    # With "follow" on, each update centres the running job again, as the pipeline moves on.
    view.set_follow(True)
    view.set_graph("p", chain(30))
    assert abs(centre_x() - node_x("j30")) < 5
    # Without it, the view stays where the operator left it.
    view.set_follow(False)
    view.set_graph("p", chain(35))
    assert abs(centre_x() - node_x("j30")) < 5
