"""Optional parts of jobdesk and the extras that install them.

`pip install jobdesk` is the headless core. A command that needs more says which extra brings it,
in one line, instead of failing with an ImportError.
"""

from __future__ import annotations

import importlib.util

from jobdesk.core.errors import JobdeskError

# extra -> the top-level modules it installs
EXTRAS: dict[str, tuple[str, ...]] = {
    "api": ("fastapi", "uvicorn"),
    "console": ("PySide6", "qasync", "pyqtgraph"),
}


class MissingExtra(JobdeskError):
    """A command needs an optional part of jobdesk that is not installed."""


def missing_modules(extra: str) -> list[str]:
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require_extra(extra: str, what: str) -> None:
    """Raise MissingExtra, naming the pip command, when `extra` is not installed for `what`."""
    if missing_modules(extra):
        raise MissingExtra(f"{what} needs the {extra} extra: pip install 'jobdesk[{extra}]'")
