"""The job table's Status column for a job scheduled for later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from PySide6.QtWidgets import QApplication

from jobdesk.console.jobs.job_table_model import COL_STATUS, JobTableModel
from jobdesk.core.models import JobCreate
from jobdesk.service.jobs import JobService
from jobdesk.store.jobs import JobFilter


async def test_a_queued_job_due_later_reads_scheduled_in(qapp: QApplication, dsn: str) -> None:
    service = await JobService.connect(dsn, pool_size=2)
    try:
        later = datetime.now(UTC) + timedelta(minutes=4, seconds=30)
        await service.enqueue_many([JobCreate("a", {}, id="later", scheduled_at=later),
                                    JobCreate("a", {}, id="now")])
        page = await service.job_page(JobFilter(), sort="created", descending=True, after=None, limit=10)
    finally:
        await service.close()

    async def no_query(call: Any) -> Any:
        raise AssertionError("not used")

    model = JobTableModel(no_query)
    model.now = datetime.now(UTC)
    shown = {row.id: model._display(row, COL_STATUS) for row in page.rows}
    assert shown["later"] == "scheduled · in 4 min"
    assert "scheduled" not in shown["now"]


async def test_the_detail_pane_says_why_a_job_waits(qapp: QApplication, dsn: str) -> None:
    from jobdesk.console.jobs.job_detail import JobDetail

    service = await JobService.connect(dsn, pool_size=2)
    try:
        at = datetime.now(UTC) + timedelta(minutes=5)
        await service.enqueue_many([JobCreate("a", {}, id="parent", scheduled_at=at),
                                    JobCreate("a", {}, id="child", dependent_on_jobs=["parent"])])
        parent, child = await service.job_detail("parent"), await service.job_detail("child")
    finally:
        await service.close()
    pane = JobDetail()
    clicked: list[str] = []
    pane.job_link_clicked.connect(clicked.append)
    pane.show_job(child)
    waiting = pane.meta_labels["Waiting"]
    assert waiting.text() == "waiting for 1 dependency: <a href='parent'>parent</a>"
    waiting.linkActivated.emit("parent")
    assert clicked == ["parent"]
    pane.show_job(parent)
    assert pane.meta_labels["Waiting"].text().startswith("scheduled for ")
    assert pane.meta_labels["Scheduled"].text().startswith(at.astimezone().strftime("%Y-%m-%d %H:%M"))
