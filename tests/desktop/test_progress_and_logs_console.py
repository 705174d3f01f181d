"""The console's side of progress and per-job logs, against a real PostgreSQL and a worker in
the console's loop: the job table's progress bar and the detail pane's, live as the job reports,
and the Logs tab that follows a running job and marks each attempt, directly and (polling) through
PgBouncer. Pictures of both are written to the test's folder (progress-and-logs-*.png)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from PySide6.QtCore import QRect
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QApplication, QStyleOptionViewItem, QTableView

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.jobs.job_progress import JobProgressDelegate
from jobdesk.console.jobs.job_table_model import COL_PROGRESS, PROGRESS_ROLE, ROW_ROLE
from jobdesk.console.main_window import MainWindow
from jobdesk.console.theme import STATUS_COLOURS
from jobdesk.core.job_report import JobProgress
from jobdesk.core.models import Job, JobCreate, ProcessorResult, Status
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_console import open_window, test_db  # noqa: F401
from tests.helpers import RunningWorker
from tests.pgbouncer import PgBouncer


class Gate(BaseProcessor):
    """Reports a quarter and a line, waits for the test, then reports the end."""

    def __init__(self) -> None:
        self.open = asyncio.Event()

    async def process(self, job: Job) -> ProcessorResult:
        await job.progress(0.25, "rendered 25 of 100 frames")
        logging.getLogger("render").info("first quarter done")
        await self.open.wait()
        logging.getLogger("render").warning("last frames <b>slow</b>")
        await job.progress(1.0, "rendered 100 of 100 frames")
        return ProcessorResult({})


class SecondTime(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        job.log(f"try {job.attempt}")
        if job.attempt == 1:
            raise RuntimeError("first try fails")
        return ProcessorResult({})


def colour_pixels(image: QImage, colour: str, x0: int, x1: int) -> int:
    """How many pixels between columns x0 and x1 have (about) this colour."""
    want = QColor(colour)
    count = 0
    for y in range(image.height()):
        for x in range(max(0, x0), min(image.width(), x1)):
            got = image.pixelColor(x, y)
            if abs(got.red() - want.red()) + abs(got.green() - want.green()) + abs(got.blue() - want.blue()) < 24:
                count += 1
    return count


async def bar_pixels(window: MainWindow, job_id: str) -> int:
    """The pixels of the selected row's Progress cell in the highlighted text's colour: its bar's fill."""
    table = window.jobs.table
    index = window.model.index(row_of(window, job_id) or 0, COL_PROGRESS)
    table.scrollTo(index)
    await asyncio.sleep(0.1)
    rect = table.visualRect(index)
    shot = table.viewport().grab(rect.adjusted(0, 0, -38, 0)).toImage()  # the bar, not the "25%" beside it
    return colour_pixels(shot, table.palette().highlightedText().color().name(), 0, shot.width())


def row_of(window: MainWindow, job_id: str) -> int | None:
    return window.model.row_of(job_id)


def test_progress_and_logs_live_in_the_console(qapp: QApplication, qtbot, test_db: str,  # type: ignore[no-untyped-def]  # noqa: F811
                                               tmp_path: Path) -> None:
    gate = Gate()

    async def scenario() -> None:
        service = await JobService.connect(test_db, pool_size=2)
        [job_id, retried] = await service.enqueue_many([JobCreate("render", {}), JobCreate("twice", {})])
        await service.close()
        window = open_window(qtbot, test_db)
        window.resize(1280, 900)
        worker = RunningWorker(test_db, {"render": gate, "twice": SecondTime()}, JOB_RETRY_INTERVALS=[0.1])
        try:
            await until(lambda: row_of(window, job_id) is not None, what="the job's row")
            window.select_job(job_id)
            detail = window.detail
            await until(lambda: detail.job_id == job_id, what="the detail of the job")

            # Running at a quarter: the row's bar, the pane's bar and message, the first line.
            def cell(role: int = 0) -> object:
                row = row_of(window, job_id)
                return None if row is None else window.model.index(row, COL_PROGRESS).data(role)

            await until(lambda: cell() == "25%", timeout=20, what="the row's progress")
            assert cell(PROGRESS_ROLE).message == "rendered 25 of 100 frames"  # type: ignore[union-attr]
            await until(lambda: detail.progress.bar.value() == 250, timeout=20, what="the pane's progress")
            assert detail.progress.bar.isVisibleTo(detail) and detail.progress.bar.text() == "25%"
            assert detail.progress.label.text().startswith("rendered 25 of 100 frames (")
            detail.tabs.setCurrentWidget(detail.logs)
            await until(lambda: "first quarter done" in detail.logs.text.toPlainText(), timeout=20,
                        what="the first line in the Logs tab")
            assert detail.logs.following and "following" in detail.logs.state.text()
            assert detail.tabs.tabText(detail.tabs.indexOf(detail.logs)) == "Logs (1)"
            quarter = await bar_pixels(window, job_id)
            assert quarter > 20, "the selected row's bar is painted"
            window.grab().save(str(tmp_path / "progress-and-logs-running.png"))

            # The rest of the run comes in while the tab is shown; following stops at the end.
            gate.open.set()
            await until(lambda: "slow" in detail.logs.text.toPlainText(), timeout=20, what="the last line")
            await until(lambda: detail.progress.bar.value() == 1000 and cell() == "100%", timeout=20,
                        what="the end's progress in the row and the pane")
            await until(lambda: not detail.logs.following, timeout=20, what="the follow to end with the job")
            assert await bar_pixels(window, job_id) > quarter + 100, "the row's bar filled up"
            assert "<b>" in detail.logs.text.toPlainText(), "a message is text, not markup"
            window.grab().save(str(tmp_path / "progress-and-logs-done.png"))

            # Two attempts: each is marked where it begins.
            window.select_job(retried)
            await until(lambda: detail.job_id == retried and detail.logs.count == 2 and not detail.logs.following,
                        timeout=30, what="both attempts' lines")
            text = detail.logs.text.toPlainText()
            assert text.index("attempt 1") < text.index("try 1") < text.index("attempt 2") < text.index("try 2")
            assert detail.progress.label.text() == "—" and not detail.progress.bar.isVisibleTo(detail)
            window.grab().save(str(tmp_path / "progress-and-logs-attempts.png"))
        finally:
            gate.open.set()
            await worker.stop()
            window.close()
            await window.connection.close()

    run_qasync(qapp, scenario(), timeout=150)


def paint_bar(qtbot, fraction: float) -> QImage:  # type: ignore[no-untyped-def]
    """The Progress cell of a running job at `fraction`, painted by the delegate on white."""

    class Index:
        def data(self, role: int) -> object:
            if role == PROGRESS_ROLE:
                return JobProgress(fraction, None, datetime.now(UTC))
            if role == ROW_ROLE:
                return SimpleNamespace(status=Status.IN_PROGRESS)
            return None

    view = QTableView()
    qtbot.addWidget(view)
    image = QImage(120, 24, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    option = QStyleOptionViewItem()
    option.initFrom(view)
    option.rect = QRect(0, 0, 120, 24)
    painter = QPainter(image)
    JobProgressDelegate().paint(painter, option, Index())  # type: ignore[arg-type]
    painter.end()
    return image


def test_the_row_bar_fills_to_its_fraction(qapp: QApplication, qtbot) -> None:  # type: ignore[no-untyped-def]
    blue = STATUS_COLOURS[Status.IN_PROGRESS][0]
    empty, half, full = (colour_pixels(paint_bar(qtbot, f), blue, 0, 120) for f in (0.0, 0.5, 1.0))
    assert empty == 0 and half > 0
    assert 1.6 * half < full < 2.4 * half


def test_progress_and_logs_through_pgbouncer(qapp: QApplication, qtbot, test_db: str,  # type: ignore[no-untyped-def]  # noqa: F811
                                             pgbouncer: PgBouncer) -> None:
    """Without LISTEN the console polls: the bars and the Logs tab still follow the job."""
    pooled = pgbouncer.url(test_db)
    gate = Gate()

    async def scenario() -> None:
        service = await JobService.connect(test_db, pool_size=2)
        [job_id] = await service.enqueue_many([JobCreate("render", {})])
        await service.close()
        connection = ConsoleConnection(pooled, load_settings(DATABASE_URL=pooled), embedded=False)
        window = MainWindow(connection)
        qtbot.addWidget(window)
        window.show()
        connection.start()
        worker = RunningWorker(pooled, {"render": gate})
        try:
            await until(lambda: connection.is_connected and row_of(window, job_id) is not None, timeout=20,
                        what="the job's row through PgBouncer")
            assert not connection.listening
            window.select_job(job_id)
            detail = window.detail
            detail.tabs.setCurrentWidget(detail.logs)

            def cell() -> object:
                row = row_of(window, job_id)
                return None if row is None else window.model.index(row, COL_PROGRESS).data()

            await until(lambda: cell() == "25%" and detail.progress.bar.value() == 250, timeout=30,
                        what="the progress, polled")
            await until(lambda: "first quarter done" in detail.logs.text.toPlainText(), timeout=30,
                        what="the first line, polled")
            gate.open.set()
            await until(lambda: cell() == "100%" and detail.progress.bar.value() == 1000, timeout=30,
                        what="the end's progress, polled")
            await until(lambda: "slow" in detail.logs.text.toPlainText() and not detail.logs.following, timeout=30,
                        what="the last line, and the follow's end")
        finally:
            gate.open.set()
            await worker.stop()
            window.close()
            await connection.close()

    run_qasync(qapp, scenario(), timeout=150)
