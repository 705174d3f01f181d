"""`make screenshots`: render the console offscreen with demo data, light and dark, to PNG files.

    python -m desktop.screenshots [OUTPUT_FOLDER]

It starts a private embedded PostgreSQL, runs the demo pipelines and a few failing jobs through
a real worker, then opens the console on that database and saves one picture per style.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

import asyncpg  # noqa: E402
import qasync  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from desktop.connection import ConsoleConnection  # noqa: E402
from desktop.main_window import MainWindow  # noqa: E402
from desktop.theme import apply_style  # noqa: E402
from worker import transitions  # noqa: E402
from worker.db import connect  # noqa: E402
from worker.embedded import EmbeddedServer  # noqa: E402
from worker.migrations import migrate  # noqa: E402
from worker.models import Job, JobCreate, ProcessorResult  # noqa: E402
from worker.processor import BaseProcessor  # noqa: E402
from worker.processors.builtin import PROCESSOR_MAP as BUILTIN  # noqa: E402
from worker.processors.demo_video import PROCESSOR_MAP as DEMO  # noqa: E402
from worker.processors.demo_video import demo_pipeline
from worker.runner import Worker  # noqa: E402
from worker.settings import load_settings  # noqa: E402


class Flaky(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        raise ConnectionError(f"upstream {job.input_data.get('host', 'api')} refused the connection")


async def seed(dsn: str) -> None:
    conn = await connect(dsn)
    try:
        await migrate(conn)
        jobs = [demo_pipeline(topic, duration_scale=0.02, fail_rate=0.3) for topic in
                ("cats at work", "the night shift", "queues explained", "a rainy Monday")]
        jobs += [JobCreate("email.send", {"to": f"user{i}@example.com", "host": "smtp.example.com"})
                 for i in range(3)]
        jobs += [JobCreate("echo", {"n": i}) for i in range(12)]
        jobs += [JobCreate("sleep", {"seconds": 120}) for _ in range(2)]
        await transitions.enqueue(conn, jobs)
    finally:
        await conn.close()
    processors = {t: c() for t, c in {**BUILTIN, **DEMO, "email.send": Flaky}.items()}
    settings = load_settings(DATABASE_URL=dsn, JOB_RETRY_INTERVALS=[0.05, 0.05], JOB_SHUTDOWN_TIMEOUT=0)
    worker = Worker(settings, dsn, processors)
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(2.5)
    conn = await connect(dsn)
    try:  # one pipeline approved, one rejected, the others left waiting for a human
        held = [r["id"] for r in await conn.fetch("SELECT id FROM jobs WHERE status = 'waiting_approval' ORDER BY seq")]
        actor = transitions.Actor("console", "operator")
        if len(held) >= 2:
            await transitions.approve(conn, held[:1], actor)
            await transitions.reject(conn, held[1:2], "the draft has the wrong colours", actor)
    finally:
        await conn.close()
    await asyncio.sleep(1.5)
    worker.request_stop()
    worker.request_stop()  # leave the long sleeps queued again
    await task
    conn = await connect(dsn)
    try:  # two long jobs shown as running, as an operator would see them
        await conn.execute("UPDATE jobs SET status = 'in_progress', started_at = now() - interval '42 seconds', "
                           "attempts = 1, worker_id = 'demo-host-1234' WHERE type = 'sleep'")
        await seed_workers(conn)
    finally:
        await conn.close()


async def seed_workers(conn: asyncpg.Connection) -> None:
    """A small fleet beside the worker that ran the demo: busy, paused, draining and lost ones,
    and queued jobs of a type none of them serves."""
    demo_types = sorted({*BUILTIN, *DEMO})
    rows = [("demo-host-1234", "demo-host", 1234, "running", 4, demo_types, 1),
             ("render-02-5678", "render-02", 5678, "paused", 8, ["video.render", "video.compose"], 3),
             ("batch-7-3456", "batch-7", 3456, "draining", 2, ["echo", "sleep"], 2),
             ("gpu-box-9012", "gpu-box", 9012, "lost", 4, ["image.generate"], 185)]
    for worker_id, host, pid, state, slots, types, age_s in rows:
        await conn.execute("""
            INSERT INTO workers (id, host, pid, concurrency, job_types, version, state, started_at, heartbeat_at)
            VALUES ($1, $2, $3, $4, $5, '0.1.0', $6, now() - interval '2 hours',
                    now() - make_interval(secs => $7))""", worker_id, host, pid, slots, types, state, age_s)
    await transitions.enqueue(conn, [JobCreate("pdf.render", {"doc": f"invoice-{i}"}) for i in range(3)])


async def shoot(app: QApplication, dsn: str, out: Path) -> list[Path]:
    saved = []
    for dark in (False, True):
        apply_style(app, dark)
        settings = load_settings(DATABASE_URL=dsn, JOBDESK_AUTOSTART_WORKER=False)
        connection = ConsoleConnection(dsn, settings, embedded=True)
        window = MainWindow(connection)
        window.resize(1280, 900)
        window.show()
        connection.start()
        for _ in range(200):
            if window.model.rowCount() > 0:
                break
            await asyncio.sleep(0.05)
        await window.refresh_counts()
        failed = next((i for i in range(window.model.rowCount())
                       if window.model.row_at(i).status.value == "failed"), 0)  # type: ignore[union-attr]
        window.table.selectRow(failed)
        await asyncio.sleep(1.0)
        path = out / f"console-{'dark' if dark else 'light'}.png"
        window.grab().save(str(path))
        saved.append(path)
        path = out / f"workers-{'dark' if dark else 'light'}.png"
        window.workers.dock.grab().save(str(path))
        saved.append(path)
        saved.append(await shoot_pipelines(window, out / f"pipelines-{'dark' if dark else 'light'}.png"))
        await connection.close()
        window.close()
    return saved


async def shoot_pipelines(window: MainWindow, path: Path) -> Path:
    """The Pipelines tab with a pipeline's DAG open, preferring one that needs attention."""
    tab = window.pipelines
    window.tabs.setCurrentWidget(tab)
    for _ in range(200):
        if tab.model.rowCount() > 0:
            break
        await asyncio.sleep(0.05)
    rows = [tab.model.row_at(i) for i in range(tab.model.rowCount())]
    wanted = ("waiting_approval", "failed", "running", "completed")
    pick = min(range(len(rows)), key=lambda i: wanted.index(rows[i].status.value)  # type: ignore[union-attr]
               if rows[i].status.value in wanted else len(wanted))  # type: ignore[union-attr]
    tab.table.selectRow(pick)
    for _ in range(200):
        if tab.dag.nodes:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    tab.dag.fit()
    focus = tab.dag.focus_node()
    if focus is not None:
        tab.dag.select_job(focus.node.id)
    await asyncio.sleep(0.8)
    window.grab().save(str(path))
    return path


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="jdshot-"))
    root.chmod(0o755)
    server = EmbeddedServer(root)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    try:
        dsn = server.ensure_running()

        async def everything() -> list[Path]:
            await seed(dsn)
            return await shoot(app, dsn, out)

        for path in qasync.run(everything()):
            print(path)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
