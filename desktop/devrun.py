"""`make run`: the console, a worker and the demo pipeline on the embedded database, one process.

Without a display (a headless machine, an SSH session) it runs the engine part alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from worker.errors import JobdeskError


def has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                or os.environ.get("QT_QPA_PLATFORM"))


async def run(app: object) -> int:
    from desktop.app import parse_args
    from desktop.connection import ConsoleConnection
    from desktop.main_window import MainWindow
    from worker.devrun import prepare
    from worker.settings import load_settings

    args = parse_args([])
    settings = load_settings()
    target, _first, worker = await prepare(settings)
    worker_task = asyncio.create_task(worker.run(), name="dev-worker")
    connection = ConsoleConnection(target.dsn, settings, embedded=target.embedded, read_only=args.read_only)
    window = MainWindow(connection)
    window.show()
    connection.start()
    closed = asyncio.Event()
    window.destroyed.connect(closed.set)
    app.lastWindowClosed.connect(closed.set)  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, lambda *_: window.close())
    signal.signal(signal.SIGTERM, lambda *_: window.close())
    await closed.wait()
    worker.request_stop()
    worker.request_stop()  # demo jobs go back to the queue at once
    await worker_task
    await connection.close()
    return 0


def main() -> int:
    if not has_display():
        print("no display found: running the database, a worker and the demo without the console",
              file=sys.stderr)
        from worker.devrun import main as engine_only

        asyncio.run(engine_only())
        return 0
    os.environ.setdefault("QT_API", "pyside6")
    import qasync
    from PySide6.QtWidgets import QApplication

    from desktop.theme import follow_os_style, icon

    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    # The window closing ends run(), which then stops the worker; Qt must not stop the loop first.
    app.setQuitOnLastWindowClosed(False)
    app.setApplicationName("jobdesk")
    app.setWindowIcon(icon("jobdesk"))
    follow_os_style(app)
    try:
        return qasync.run(run(app))
    except JobdeskError as exc:
        print(f"jobdesk: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
