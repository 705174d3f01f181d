"""The command line that starts `jobdesk worker` from this installation.

In a packaged bundle the executable is jobdesk itself, so the worker is the same binary with
the `worker` subcommand; from a Python install it is this interpreter running the CLI module.
"""

from __future__ import annotations

import sys


def worker_command(*args: str) -> list[str]:
    """argv that runs `jobdesk worker *args` with this installation."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "worker", *args]
    return [sys.executable, "-m", "jobdesk.cli", "worker", *args]
