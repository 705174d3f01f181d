"""`make run`: the console on the embedded database with the demo pipeline enqueued.

The console starts a worker by itself (as a child process, shown in its Workers dock), exactly
as a user's own `jobdesk` does. Without a display (a headless machine, an SSH session) it runs
the engine part alone. Before Qt starts, it checks the system libraries Qt's window needs, and
installs the missing ones as root where apt-get is there.
"""

from __future__ import annotations

import asyncio
import sys

from jobdesk.console.launcher import has_display
from jobdesk.console.platform_check import Problem, install_debian_packages
from jobdesk.core.errors import JobdeskError


def window_problem() -> Problem | None:
    """Why the console could not open here; as root with apt-get, the missing system libraries
    are installed first (containers, CI, a fresh machine run by its admin)."""
    from jobdesk.console.app import qt_platform_problem  # the libraries, even where a QApplication runs (tests)

    problem = qt_platform_problem()
    if problem is not None and install_debian_packages(problem.debian_packages):
        problem = qt_platform_problem()
    return problem


def main() -> int:
    if not has_display():
        print("no display found: running the database, a worker and the demo without the console",
              file=sys.stderr)
        from jobdesk.cli.devrun import main as engine_only

        asyncio.run(engine_only())
        return 0
    problem = window_problem()
    if problem is not None:
        print(f"jobdesk: error: {problem.message}", file=sys.stderr)
        return 1
    from jobdesk.cli.devrun import seed_demo
    from jobdesk.core.settings import load_settings

    try:
        database, first = asyncio.run(seed_demo(load_settings()))
    except JobdeskError as exc:
        print(f"jobdesk: error: {exc}", file=sys.stderr)
        return 1
    hint = ("the console starts a worker" if database.embedded
            else "start a worker with `jobdesk worker` or the console's Launch worker button")
    print(f"demo pipeline {first.pipeline_id} enqueued on {database.describe()}; {hint}", file=sys.stderr)
    from jobdesk.console.app import main as console_main

    return console_main([])


if __name__ == "__main__":
    sys.exit(main())
