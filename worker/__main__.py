"""`python -m jobdesk`: the `jobdesk` command (the CLI, or the console with no subcommand)."""

import sys
from importlib import import_module  # noqa: TID251 - the console, named: a headless engine has no Qt
from pathlib import Path

# A checkout whose link `worker/console` -> ../desktop is a plain file (git without symlink support), run
# through an install made while the link was there: the console is not found where the install looks.
LINKS_HINT = ("jobdesk: the link worker/console -> ../desktop is a plain file in this checkout: restore the links "
              "with `git config core.symlinks true && git checkout -- jobdesk worker/console` (on Windows, turn on "
              "Developer Mode first), or install the checkout again: pip install -e .")


def main() -> int:
    try:
        # The launcher lives with the console and imports no Qt itself; it is named, not imported, here so
        # that the engine's import graph keeps no edge to the console (a headless install has no Qt).
        launcher = import_module("jobdesk.console.launcher")
    except ModuleNotFoundError as exc:
        link = Path(__file__).parent / "console"
        if exc.name in ("jobdesk.console", "jobdesk.console.launcher") and link.is_file():
            print(LINKS_HINT, file=sys.stderr)
            return 1
        raise
    code: int = launcher.main()
    return code


if __name__ == "__main__":
    sys.exit(main())
