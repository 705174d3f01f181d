"""`make screenshots`: render the console offscreen with demo data, light and dark, to PNG files.

    python -m jobdesk.console.screenshots [OUTPUT_FOLDER]

It starts a private embedded PostgreSQL, fills it with `jobdesk.cli.showcase` (the demo pipelines and
a few failing jobs run through a real worker), then opens the console on that database and
saves one picture per view (among them the Stack tab of a running job), style and window size:
`console-light.png` at 1280×900, and `console-light-1920x1080.png` at 1920×1080; and the console on a
viewer's connection, `console-read-only-light.png` and `-dark.png`, at 1280×900.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

import qasync
from PySide6.QtWidgets import QApplication

from jobdesk.cli.showcase import demo_viewer, metrics_history, showcase
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.main_window import MainWindow
from jobdesk.console.theme import apply_style
from jobdesk.core.settings import load_settings
from jobdesk.embedded.server import EmbeddedServer
from jobdesk.service.jobs import migrate_database

SIZES = [(1280, 900), (1920, 1080)]
POLL_S = 0.05


async def until(condition: Callable[[], object], tries: int = 200) -> None:
    """Wait until `condition()` holds, checking every POLL_S, for at most `tries` checks: past
    them the picture is taken as the view then is."""
    for _ in range(tries):
        if condition():
            return
        await asyncio.sleep(POLL_S)


def open_window(app: QApplication, dsn: str, dark: bool, size: tuple[int, int]) -> tuple[MainWindow, ConsoleConnection]:
    """A console window on `dsn`, in the given style and size, shown and connecting."""
    apply_style(app, dark)
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn, JOBDESK_AUTOSTART_WORKER=False),
                                   embedded=True)
    window = MainWindow(connection)
    window.resize(*size)
    window.show()
    connection.start()
    return window, connection


def name(view: str, dark: bool, size: tuple[int, int]) -> str:
    """`history-dark.png` at the first size, `history-dark-1920x1080.png` at the others."""
    suffix = "" if size == SIZES[0] else f"-{size[0]}x{size[1]}"
    return f"{view}-{'dark' if dark else 'light'}{suffix}.png"


async def shoot(app: QApplication, dsn: str, out: Path) -> list[Path]:
    saved = []
    for size in SIZES:
        for dark in (False, True):
            saved.extend(await shoot_window(app, dsn, out, dark, size))
    viewer = await demo_viewer(dsn)
    for dark in (False, True):
        saved.append(await shoot_read_only(app, viewer, dark, out / name("console-read-only", dark, SIZES[0])))
    await metrics_history(dsn)  # after the other pictures, which it would change
    for size in SIZES:
        for dark in (False, True):
            saved.append(await shoot_metrics(app, dsn, dark, out / name("metrics", dark, size), size))
    return saved


async def shoot_window(app: QApplication, dsn: str, out: Path, dark: bool, size: tuple[int, int]) -> list[Path]:
    """Every view but Metrics, in one window."""
    saved = []
    window, connection = open_window(app, dsn, dark, size)
    await until(lambda: window.model.rowCount() > 0)
    await window.refresh_counts()
    failed = next((i for i in range(window.model.rowCount())
                   if window.model.row_at(i).status.value == "failed"), 0)  # type: ignore[union-attr]
    window.jobs.table.selectRow(failed)
    await asyncio.sleep(1.0)
    path = out / name("console", dark, size)
    window.grab().save(str(path))
    saved.append(path)
    rows = [window.model.row_at(i) for i in range(window.model.rowCount())]
    retried = max(range(len(rows)), key=lambda i: rows[i].attempts)  # type: ignore[union-attr]
    window.jobs.table.selectRow(retried)  # the job with the most attempts, for the timeline
    window.detail.tabs.setCurrentIndex(window.detail.tabs.count() - 1)  # History
    await asyncio.sleep(0.8)
    path = out / name("history", dark, size)
    window.detail.grab().save(str(path))
    saved.append(path)
    saved.append(await shoot_workers(window, out / name("workers", dark, size)))
    saved.append(await shoot_types(window, out / name("types", dark, size)))
    saved.append(await shoot_pipelines(window, out / name("pipelines", dark, size)))
    saved.append(await shoot_schedules(window, out / name("schedules", dark, size)))
    saved.append(await shoot_approvals(window, out / name("approvals", dark, size)))
    saved.append(await shoot_new_job(window, out / name("new-job", dark, size)))
    saved.append(await shoot_failures(window, out / name("failures", dark, size)))
    saved.append(await shoot_stack(window, out / name("stack", dark, size)))
    await connection.close()
    window.close()
    return saved


async def shoot_workers(window: MainWindow, path: Path) -> Path:
    """The whole window with the Workers dock opened from the toolbar (it is closed by default)."""
    window.tabs.setCurrentWidget(window.jobs)
    window.workers.dock_action.trigger()
    await until(lambda: window.workers.panel.model.rowCount() > 0, tries=100)
    await asyncio.sleep(0.5)
    window.grab().save(str(path))
    window.workers.dock_action.trigger()
    return path


async def shoot_types(window: MainWindow, path: Path) -> Path:
    """The Workers dock with every type shown: each type's gauge and 5-minute sparkline."""
    window.tabs.setCurrentWidget(window.jobs)
    window.workers.dock_action.trigger()
    types = window.workers.panel.types
    types.all_types.setChecked(True)
    await until(lambda: types.records)
    await window.workers.panel.refresh_limits()
    await asyncio.sleep(0.5)
    window.grab().save(str(path))
    types.all_types.setChecked(False)
    window.workers.dock_action.trigger()
    return path


async def shoot_metrics(app: QApplication, dsn: str, dark: bool, path: Path, size: tuple[int, int]) -> Path:
    """The Metrics tab over the last hour."""
    window, connection = open_window(app, dsn, dark, size)
    window.tabs.setCurrentWidget(window.metrics)
    await until(lambda: window.metrics.metrics is not None)
    await asyncio.sleep(0.8)
    window.grab().save(str(path))
    await connection.close()
    window.close()
    return path


async def shoot_read_only(app: QApplication, dsn: str, dark: bool, path: Path) -> Path:
    """The console on a viewer's connection: "read-only" in the status bar, every action off."""
    apply_style(app, dark)
    connection = ConsoleConnection(dsn, load_settings(DATABASE_URL=dsn, JOBDESK_AUTOSTART_WORKER=False),
                                   embedded=False)  # a URL with the viewer's role
    window = MainWindow(connection)
    window.resize(*SIZES[0])
    window.show()
    connection.start()
    for _ in range(200):
        if window.model.rowCount() > 0 and window.status_bar.read_only.isVisible():
            break
        await asyncio.sleep(0.05)
    failed = next((i for i in range(window.model.rowCount())
                   if window.model.row_at(i).status.value == "failed"), 0)  # type: ignore[union-attr]
    window.jobs.table.selectRow(failed)
    await asyncio.sleep(1.0)
    window.grab().save(str(path))
    await connection.close()
    window.close()
    return path


async def shoot_pipelines(window: MainWindow, path: Path) -> Path:
    """The Pipelines tab with a pipeline's DAG open, preferring one that needs attention."""
    tab = window.pipelines
    window.tabs.setCurrentWidget(tab)
    await until(lambda: tab.model.rowCount() > 0)
    rows = [tab.model.row_at(i) for i in range(tab.model.rowCount())]
    wanted = ("waiting_approval", "failed", "running", "completed")
    pick = min(range(len(rows)), key=lambda i: wanted.index(rows[i].status.value)  # type: ignore[union-attr]
               if rows[i].status.value in wanted else len(wanted))  # type: ignore[union-attr]
    tab.table.selectRow(pick)
    await until(lambda: tab.dag.nodes)
    await asyncio.sleep(0.5)
    tab.dag.fit()
    focus = tab.dag.focus_node()
    if focus is not None:
        tab.dag.select_job(focus.node.id)
    await asyncio.sleep(0.8)
    window.grab().save(str(path))
    return path


async def shoot_schedules(window: MainWindow, path: Path) -> Path:
    """The Schedules tab with the every-second schedule selected, its jobs below."""
    tab = window.schedules
    window.tabs.setCurrentWidget(tab)
    await until(lambda: tab.model.rowCount() > 0 and tab.select("heartbeat"))
    await until(lambda: tab.ticks.rowCount() > 0, tries=100)
    await asyncio.sleep(0.3)
    window.grab().save(str(path))
    return path


async def shoot_approvals(window: MainWindow, path: Path) -> Path:
    """The Approvals tab with its first job and that job's result."""
    tab = window.approvals
    window.tabs.setCurrentWidget(tab)
    await until(lambda: tab.model.rowCount() > 0 and tab.selected_rows()
                and tab.result_view.raw.toPlainText() != "(none)")
    await asyncio.sleep(0.5)
    window.grab().save(str(path))
    return path


async def shoot_failures(window: MainWindow, path: Path) -> Path:
    """The Failures tab with its largest group selected, showing the sample traceback."""
    tab = window.failures
    window.tabs.setCurrentWidget(tab)
    await until(lambda: tab.model.rowCount() > 0)
    tab.table.selectRow(0)
    await until(lambda: tab.traceback_view.toPlainText(), tries=100)
    await asyncio.sleep(0.5)
    window.grab().save(str(path))
    return path


async def shoot_stack(window: MainWindow, path: Path) -> Path:
    """A running job (one of the showcase's long sleeps) with the detail pane's Stack tab open."""
    window.tabs.setCurrentWidget(window.jobs)
    for _ in range(200):
        rows = [window.model.row_at(i) for i in range(window.model.rowCount())]
        running = [i for i, row in enumerate(rows) if row is not None and row.status.value == "in_progress"]
        if running:
            break
        await asyncio.sleep(0.05)
    window.jobs.table.selectRow(running[0])
    stack = window.detail.stack
    for _ in range(200):
        if window.detail.record is not None and window.detail.record.status.value == "in_progress":
            break
        await asyncio.sleep(0.05)
    window.detail.tabs.setCurrentWidget(stack)
    for _ in range(200):
        if stack.stack is not None:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    window.grab().save(str(path))
    return path


async def shoot_new_job(window: MainWindow, path: Path) -> Path:
    """The New job dialog, filled in."""
    window.tabs.setCurrentWidget(window.jobs)
    window.new_job()
    dialog = window.new_job_dialog
    assert dialog is not None
    await until(lambda: dialog.type_combo.count() > 0, tries=100)
    dialog.type_combo.setCurrentText("echo")
    dialog.input_edit.setPlainText('{\n  "hello": "world",\n  "count": 3\n}')
    dialog.priority.setValue(5)
    await asyncio.sleep(0.3)
    dialog.grab().save(str(path))
    dialog.reject()
    return path


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="jdshot-"))
    root.chmod(0o755)
    server = EmbeddedServer(root)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    app.setQuitOnLastWindowClosed(False)  # the demo worker stops after the last window closes
    try:
        dsn = server.ensure_running()

        async def everything() -> list[Path]:
            await migrate_database(dsn)
            async with showcase(dsn):
                return await shoot(app, dsn, out)

        for path in qasync.run(everything()):
            print(path)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
