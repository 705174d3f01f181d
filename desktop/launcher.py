"""The `jobdesk` command: with a subcommand it is the CLI; without one it opens the console.

Kept free of Qt imports, so that `jobdesk worker` runs on a headless server.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

CONSOLE_FLAGS = {"--read-only", "--production", "--dark", "--light", "--no-worker", "--smoke-test"}


def has_display() -> bool:
    """Whether Qt has somewhere to show a window (or was told to draw offscreen)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                or os.environ.get("QT_QPA_PLATFORM"))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if all(a in CONSOLE_FLAGS for a in args):
        from jobdesk.core.extras import MissingExtra, require_extra

        try:
            require_extra("console", "the jobdesk console")
        except MissingExtra as exc:
            print(exc, file=sys.stderr)
            return 1
        from jobdesk.console.app import main as console_main

        return console_main(args)
    from jobdesk.cli.main import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
