"""The attempt timeline: segments read from a job and its attempts (pure), and drawn in the
detail pane's History tab above the history table."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.jobs.attempt_timeline import BACKOFF, RUN, SUSPEND, WAIT, AttemptTimeline, Segment, segments
from jobdesk.console.main_window import MainWindow
from jobdesk.core.models import JobRecord
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import Attempt
from tests import pg
from tests.desktop.qt_helpers import run_qasync, until

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(status: str, **values: Any) -> JobRecord:
    row = {"id": "j", "type": "t", "status": status, "user_id": 1, "pipeline_id": None, "input_data": {},
           "result_data": None, "error_message": None, "dependent_on_jobs": [], "retry_count": 0,
           "next_retry_at": None, "is_active": True, "created_at": T0, "updated_at": T0, "completed_at": None,
           "priority": 0, "pending_deps": 0, "attempts": 0, "worker_id": None, "started_at": None}
    row.update(values)
    return JobRecord.from_row(row)


def attempt(n: int, start: float, end: float, outcome: str = "failed") -> Attempt:
    return Attempt(n, "w", at(start), at(end), outcome, "boom", None)


def shape(items: list) -> list[tuple[str, int, float, float, str, bool]]:  # type: ignore[type-arg]
    return [(s.kind, s.attempt, (s.start - T0).total_seconds(), (s.end - T0).total_seconds(), s.outcome,
             s.open_ended) for s in items]


def test_two_failures_with_backoff_then_success() -> None:
    record = job("completed", started_at=at(40), completed_at=at(45), attempts=3)
    got = segments(record, [attempt(1, 2, 5), attempt(2, 15, 16, "lost")], now=at(100))
    assert shape(got) == [(WAIT, 1, 0, 2, "", False), (RUN, 1, 2, 5, "failed", False),
                          (BACKOFF, 2, 5, 15, "", False), (RUN, 2, 15, 16, "lost", False),
                          (BACKOFF, 3, 16, 40, "", False), (RUN, 3, 40, 45, "completed", False)]


def test_running_now_and_a_retry_still_due() -> None:
    running = segments(job("in_progress", started_at=at(3)), [], now=at(10))
    assert shape(running) == [(WAIT, 1, 0, 3, "", False), (RUN, 1, 3, 10, "running", True)]
    due = segments(job("queued", next_retry_at=at(30)), [attempt(1, 1, 4)], now=at(10))
    assert shape(due) == [(WAIT, 1, 0, 1, "", False), (RUN, 1, 1, 4, "failed", False), (BACKOFF, 2, 4, 30, "", True)]
    assert due[-1].describe() == "attempt 2: backoff before the retry, 26.0s (due)"
    waiting = segments(job("queued"), [], now=at(5))
    assert shape(waiting) == [(WAIT, 1, 0, 5, "", True)]


def test_a_failed_job_is_not_counted_twice() -> None:
    # The last failed attempt is in job_attempts and also in the job row's started_at.
    got = segments(job("failed", started_at=at(1)), [attempt(1, 1, 2)], now=at(9))
    assert shape(got) == [(WAIT, 1, 0, 1, "", False), (RUN, 1, 1, 2, "failed", False)]


def test_the_widget_lays_segments_out_in_order(qtbot) -> None:  # type: ignore[no-untyped-def]
    widget = AttemptTimeline()
    qtbot.addWidget(widget)
    widget.resize(400, 70)
    widget.show_segments(segments(job("completed", started_at=at(40), completed_at=at(50)),
                                  [attempt(1, 0, 10)], now=at(60)))
    rects = widget.rects()
    assert [s.kind for _r, s in rects] == [RUN, BACKOFF, RUN]
    lefts = [r.left() for r, _s in rects]
    assert lefts == sorted(lefts) and rects[0][0].left() >= 0 and rects[-1][0].right() <= 400
    assert not widget.grab().isNull()
    assert rects[1][0].contains(rects[1][0].center()) and widget.childAt(QPoint(5, 5)) is None


def test_labels_above_the_lane_never_overlap_nor_leave_the_widget(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A durable job's runs close together (a short run, a short suspension, the next run) used
    to write "#1 suspended#2" in one smear, and the last run's label ran past the right edge."""
    widget = AttemptTimeline()
    qtbot.addWidget(widget)
    widget.resize(470, 70)
    widget.segments = [Segment(RUN, 1, at(0), at(3.7), "suspended"), Segment(SUSPEND, 1, at(3.7), at(4.2), "sleeping"),
                       Segment(RUN, 2, at(4.2), at(4.25), "suspended"),
                       Segment(SUSPEND, 2, at(4.25), at(25), "waiting for event upload-1"),
                       Segment(RUN, 3, at(25), at(28.4), "completed")]
    labels = widget.labels()
    assert [label for _x, label, _s in labels] == ["#1 suspended", "#2", "waiting for event upload-1", "#3 completed"]
    metrics = QFontMetrics(widget.font())
    spans = [(x, x + metrics.horizontalAdvance(label)) for x, label, _s in labels]
    gap = AttemptTimeline.LABEL_GAP
    assert all(end + gap <= start for (_a, end), (start, _b) in zip(spans, spans[1:], strict=False))
    assert spans[0][0] >= 0 and spans[-1][1] <= widget.width()
    assert not widget.grab().isNull()


@pytest.fixture
def test_db(template: str, pg_server):  # type: ignore[no-untyped-def]
    dsn = asyncio.run(pg.create_test_database(template))
    yield dsn
    asyncio.run(pg.drop_test_database(dsn))


def test_history_tab_draws_the_timeline_above_the_table(qapp: QApplication, qtbot,  # type: ignore[no-untyped-def]
                                                        test_db: str) -> None:
    async def scenario() -> None:
        conn = await asyncpg.connect(test_db)
        await conn.execute("INSERT INTO jobs (id, type, input_data, status, started_at, completed_at, attempts, "
                           "created_at) VALUES ('h-1', 'echo', '{}', 'completed', now() - interval '5 s', now(), 3, "
                           "now() - interval '60 s')")
        await conn.execute("INSERT INTO job_attempts (job_id, attempt, started_at, finished_at, outcome, "
                           "error_message) VALUES "
                           "('h-1', 1, now() - interval '58 s', now() - interval '50 s', 'failed', 'E1'), "
                           "('h-1', 2, now() - interval '40 s', now() - interval '30 s', 'lost', 'E2')")
        connection = ConsoleConnection(test_db, load_settings(DATABASE_URL=test_db), embedded=False)
        window = MainWindow(connection)
        qtbot.addWidget(window)
        window.show()
        connection.start()
        await until(lambda: window.model.rowCount() == 1, what="the row")
        window.select_job("h-1")
        await until(lambda: window.detail.job_id == "h-1", what="the detail pane")
        detail = window.detail
        assert [(s.kind, s.outcome) for s in detail.timeline.segments] == [
            (WAIT, ""), (RUN, "failed"), (BACKOFF, ""), (RUN, "lost"), (BACKOFF, ""), (RUN, "completed")]
        detail.tabs.setCurrentIndex(detail.tabs.count() - 1)
        history = detail.tabs.currentWidget()
        assert history.layout().itemAt(0).widget() is detail.timeline
        assert history.layout().itemAt(1).widget() is detail.history and detail.history.rowCount() == 2
        assert not detail.timeline.grab().isNull()
        await conn.close()
        window.close()
        await connection.close()

    run_qasync(qapp, scenario())
