"""The detail pane's Stack tab, against a real PostgreSQL and a worker in the console's loop: it
asks when opened and on Refresh, shows the running job's stack as a traceback prints it, the
stack kept after the job ended, and a job that never ran as a message."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QApplication

from jobdesk.core.models import JobCreate
from jobdesk.service.jobs import JobService
from tests.desktop.qt_helpers import run_qasync, until
from tests.desktop.test_console import open_window, test_db  # noqa: F401
from tests.helpers import RunningWorker
from tests.stack_processors import AsyncHold


def test_the_stack_tab(qapp: QApplication, qtbot, test_db: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    holds = AsyncHold()

    async def scenario() -> None:
        service = await JobService.connect(test_db, pool_size=2)
        [job_id, never] = await service.enqueue_many([JobCreate("hold", {}), JobCreate("nobody.runs.this", {})])
        window = open_window(qtbot, test_db)
        window.resize(1280, 900)
        worker = RunningWorker(test_db, {"hold": holds})
        try:
            await until(lambda: window.model.row_of(job_id) is not None, what="the job's row")
            await until(lambda: _status(window, job_id) == "in_progress", timeout=20, what="the job to run")
            window.select_job(job_id)
            detail = window.detail
            stack = detail.stack
            await until(lambda: detail.job_id == job_id, what="the detail of the job")
            assert detail.tabs.tabText(detail.tabs.indexOf(stack)) == "Stack"
            assert stack.stack is None, "nothing is asked before the tab is opened"
            detail.tabs.setCurrentWidget(stack)
            await until(lambda: stack.stack is not None, timeout=10, what="the stack")
            first = stack.stack
            assert stack.state.text().startswith(f"Stack of job {job_id}, attempt 1 on worker ")
            text = stack.text.toPlainText()
            assert text.index(", in process") < text.index(", in hold_async")
            assert "    await self.release.wait()  # the async job waits here" in text
            cut = f'  File "…/{Path(__file__).parents[2].name}/tests/stack_processors.py", line '
            assert cut in text  # the pane is narrow: the path's last three parts
            assert "/tests/stack_processors.py, line " in stack.text.toolTip()  # and the whole path
            window.grab().save(str(tmp_path / "stack-running.png"))

            stack.refresh_button.click()  # asks again
            await until(lambda: stack.stack is not first and stack.stack is not None, what="a new stack")
            assert stack.stack.taken_at > first.taken_at  # type: ignore[union-attr]

            holds.release.set()
            await until(lambda: _status(window, job_id) == "completed", timeout=20, what="the job to end")
            await until(lambda: stack.refresh_button.isEnabled(), what="Refresh to be ready")
            stack.refresh_button.click()
            await until(lambda: stack.stack is not None and not stack.stack.running, what="the kept stack")
            assert stack.state.text().endswith("; the job has ended since (completed):")
            assert stack.text.toPlainText() == text

            window.select_job(never)
            await until(lambda: detail.job_id == never and stack.state.text().endswith("(queued)"),
                        what="the message for a job that never ran")
            assert stack.state.text() == f"job {never} is not running (queued)"
            assert stack.text.toPlainText() == ""
        finally:
            holds.release.set()
            await worker.stop()
            await service.close()
            window.close()
            await window.connection.close()

    run_qasync(qapp, scenario(), timeout=120)


def _status(window, job_id: str) -> str | None:  # type: ignore[no-untyped-def]
    row = window.model.row_of(job_id)
    record = window.model.row_at(row) if row is not None else None
    return record.status.value if record is not None else None
