"""Composition root of the console: settings, database, connection, window, event loop."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

os.environ.setdefault("QT_API", "pyside6")

import qasync  # noqa: E402
from PySide6.QtWidgets import QApplication, QMessageBox  # noqa: E402

from desktop.connection import ConsoleConnection  # noqa: E402
from desktop.main_window import MainWindow  # noqa: E402
from desktop.theme import apply_style, icon  # noqa: E402
from worker.db import resolve_target  # noqa: E402
from worker.errors import JobdeskError  # noqa: E402
from worker.settings import load_settings  # noqa: E402

log = logging.getLogger("jobdesk.console")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jobdesk", description="The jobdesk console.")
    parser.add_argument("--read-only", action="store_true", help="browse only; no actions")
    parser.add_argument("--production", action="store_true", help="mark this database as production")
    parser.add_argument("--dark", action="store_true", default=None, help="force the dark style")
    parser.add_argument("--light", dest="dark", action="store_false", help="force the light style")
    return parser.parse_args(list(argv))


async def run_console(app: QApplication, args: argparse.Namespace) -> int:
    settings = load_settings()
    target = resolve_target(settings)
    connection = ConsoleConnection(target.dsn, settings, embedded=target.embedded, read_only=args.read_only)
    window = MainWindow(connection, production=args.production)
    window.show()
    connection.start()
    closed = asyncio.Event()
    app.lastWindowClosed.connect(closed.set)
    await closed.wait()
    await connection.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    app.setApplicationName("jobdesk")
    app.setWindowIcon(icon("jobdesk"))
    apply_style(app, args.dark)
    try:
        return qasync.run(run_console(app, args))
    except JobdeskError as exc:
        QMessageBox.critical(None, "jobdesk", str(exc))
        print(f"jobdesk: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
