"""`python -m jobdesk`: the `jobdesk` command (the CLI, or the console with no subcommand)."""

import sys
from importlib import import_module  # noqa: TID251 - the console, named: a headless engine has no Qt

# The launcher lives with the console and imports no Qt itself; it is named, not imported, here so
# that the engine's import graph keeps no edge to the console (a headless install has no Qt).
sys.exit(import_module("jobdesk.console.launcher").main())
