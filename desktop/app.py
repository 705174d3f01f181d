"""Composition root of the console: settings, database, connection, window, event loop."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("QT_API", "pyside6")

import qasync
from PySide6.QtCore import QLibraryInfo
from PySide6.QtWidgets import QApplication, QMessageBox

from jobdesk.console import errors
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.connection_dialog import Profile
from jobdesk.console.main_window import MainWindow
from jobdesk.console.platform_check import Problem, check_platform
from jobdesk.console.smoke import smoke_test
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import apply_style, follow_os_style, icon
from jobdesk.core.errors import JobdeskError
from jobdesk.core.settings import load_settings
from jobdesk.store.db import Database

log = logging.getLogger("jobdesk.console")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jobdesk", description="The jobdesk console.")
    parser.add_argument("--read-only", action="store_true", help="browse only; no actions")
    parser.add_argument("--production", action="store_true", help="mark this database as production")
    parser.add_argument("--dark", action="store_true", default=None, help="force the dark style")
    parser.add_argument("--light", dest="dark", action="store_false", help="force the light style")
    parser.add_argument("--no-worker", action="store_true",
                        help="do not start a worker on the embedded database (JOBDESK_AUTOSTART_WORKER=false)")
    parser.add_argument("--job", metavar="JOB_ID", help="open on this job (`jobdesk open JOB_ID` checks it first)")
    parser.add_argument("--smoke-test", action="store_true",
                        help="connect, wait until jobs are shown, print one line and exit (0 if it worked)")
    return parser.parse_args(list(argv))


class Console:
    """The open console window and its connection; switches both when another database is chosen."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        no_worker = args.no_worker or args.smoke_test  # a smoke test changes nothing
        self.settings = load_settings(**({"JOBDESK_AUTOSTART_WORKER": False} if no_worker else {}))
        self.window: MainWindow | None = None
        self.closed = asyncio.Event()

    def open(self, dsn: str, *, embedded: bool, production: bool, read_only: bool) -> None:
        connection = ConsoleConnection(dsn, self.settings, embedded=embedded, read_only=read_only)
        window = MainWindow(connection, production=production)
        window.switch_requested.connect(self.switch)
        window.show()
        connection.start()
        old, self.window = self.window, window
        if old is not None:
            old.close()
            spawn(old.connection.close(), "close-old-connection")

    def switch(self, profile: Profile | None, url: str | None) -> None:
        if profile is None:
            try:
                database = Database.embedded_default()
            except JobdeskError as exc:
                QMessageBox.warning(self.window, "jobdesk", str(exc))
                return
            self.open(database.dsn, embedded=True, production=False, read_only=self.args.read_only)
        else:
            self.open(url or profile.url, embedded=False, production=profile.production,
                      read_only=self.args.read_only or profile.read_only)


async def run_console(app: QApplication, args: argparse.Namespace) -> int:
    errors.install(asyncio.get_running_loop())  # a bug shows a dialog and its log, never a silent stop
    console = Console(args)
    database = Database.resolve(console.settings)  # the console's first database; a switch chooses another
    console.open(database.dsn, embedded=database.embedded, production=args.production, read_only=args.read_only)
    if args.job and console.window is not None:
        console.window.share.open_job(args.job)
    if args.smoke_test and console.window is not None:
        return await smoke_test(console.window)
    app.lastWindowClosed.connect(console.closed.set)
    # Ctrl-C or SIGTERM in the terminal close the console like its window's close button.
    signal.signal(signal.SIGINT, lambda *_: console.closed.set())
    signal.signal(signal.SIGTERM, lambda *_: console.closed.set())
    await console.closed.wait()
    if console.window is not None:
        await console.window.shutdown()
    return 0


def platform_problem() -> Problem | None:
    """Why Qt could not open a window here (it would abort the process), or None; nothing once
    this process has its QApplication (a window opens)."""
    if QApplication.instance() is not None:
        return None
    return qt_platform_problem()


def qt_platform_problem() -> Problem | None:
    """Why Qt's platforms could not open a window here, whatever this process has started."""
    return check_platform(Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    problem = platform_problem()
    if problem is not None:
        print(f"jobdesk: error: {problem.message}", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)  # a traceback a second while the database is away
    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    app.setApplicationName("jobdesk")
    app.setWindowIcon(icon("jobdesk"))
    if args.dark is None:
        follow_os_style(app)
    else:
        apply_style(app, args.dark)
    try:
        return qasync.run(run_console(app, args))
    except JobdeskError as exc:
        if not args.smoke_test:
            QMessageBox.critical(None, "jobdesk", str(exc))
        print(f"jobdesk: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
