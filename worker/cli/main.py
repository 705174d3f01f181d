"""`jobdesk`: the command line's parser and dispatch. Each command group is a module of its own
(jobs, pipelines, workers, schedules, types, database, api); bad input gets one line on stderr and a
non-zero exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module  # noqa: TID251 - the CLI's own groups, loaded by the command run
from types import ModuleType
from typing import TYPE_CHECKING

from jobdesk.cli import front
from jobdesk.cli.arguments import EXIT_ERROR, ArgumentParser, Subparsers
from jobdesk.core.errors import JobdeskError, ReadOnlyRole
from jobdesk.core.extras import MissingExtra

if TYPE_CHECKING:
    from jobdesk.cli.session import Command

# This module imports nothing heavy (pydantic, asyncio, asyncpg and the command groups load when a
# command runs), so that `jobdesk --version` and `jobdesk --help` answer at once (jobdesk.cli.front).

# Each command group's module (jobdesk.cli.GROUP) and the commands it runs (its COMMANDS). A
# command loads its group's module alone (and what that imports): `jobdesk worker` does not load
# what `jobdesk export` needs, and starts sooner. tests/cli check this table against the modules.
GROUPS: dict[str, tuple[str, ...]] = {
    "database": ("migrate", "db", "prune", "stats"),
    "workers": ("worker", "workers", "worker-ctl"),
    "jobs": ("submit", "jobs", "show", "cancel", "retry", "approve", "reject", "demo"),
    "pipelines": ("pipelines", "cancel-pipeline"),
    "api": ("api", "token"),
    "schedules": ("schedule",),
    "types": ("types",),
    "events": ("event",),
    "doctor": ("doctor",),
    "sharing": ("export", "open"),
    "logs": ("logs",),
    "grants": ("grant",),
    "stacks": ("stack",),
}
GROUP_OF = {command: group for group, commands in GROUPS.items() for command in commands}

# Each group's parser adders, in the order `jobdesk --help` lists their commands.
PARSERS: tuple[tuple[str, str], ...] = (
    ("database", "add_setup_parsers"), ("workers", "add_worker_parser"), ("jobs", "add_parsers"),
    ("logs", "add_parsers"), ("stacks", "add_parsers"), ("sharing", "add_parsers"), ("workers", "add_fleet_parser"),
    ("pipelines", "add_parsers"), ("database", "add_upkeep_parsers"), ("workers", "add_control_parser"),
    ("api", "add_parsers"), ("schedules", "add_parsers"), ("types", "add_parsers"), ("events", "add_parsers"),
    ("doctor", "add_parsers"), ("grants", "add_parsers"))


def group_module(group: str) -> ModuleType:
    return import_module(f"jobdesk.cli.{group}")


def build_parser(command: str | None = None) -> ArgumentParser:
    """The whole command line's parser; given a known `command`, one with its group's commands
    alone, which parses that command's arguments (and words their errors) as the whole one does."""
    groups = {GROUP_OF[command]} if command in GROUP_OF else set(GROUPS)
    common = ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser, sub = front.top_parser()
    for group, adder in PARSERS:
        if group in groups:
            add: Callable[[Subparsers, ArgumentParser], None] = getattr(group_module(group), adder)
            add(sub, common)
    return parser


def setup_logging(level: str) -> None:
    import logging

    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    # While the database is away, asyncpg's pool logs a traceback every second as it retries; the
    # worker already says once that the database is unreachable, and again when it is back.
    logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command; its failures are the caller's to report."""
    import asyncio

    from jobdesk.cli.session import Invocation
    from jobdesk.core.plain_settings import load_settings
    from jobdesk.observe import otel_setup

    settings = load_settings()
    setup_logging(settings.LOG_LEVEL if args.command == "worker" else "WARNING")
    # Traces when OTEL_TRACES_EXPORTER asks for them: the worker's runs, the CLI's enqueues. The
    # API sets them up in each process that serves (jobdesk.api.server).
    service = "jobdesk-worker" if args.command == "worker" else "jobdesk-cli"
    shutdown = otel_setup.configure_from_env(service) if args.command != "api" else None
    try:
        command: Command = group_module(GROUP_OF[args.command]).COMMANDS[args.command]
        outcome = command(Invocation(args, settings))
        return outcome if isinstance(outcome, int) else asyncio.run(outcome)
    finally:
        if shutdown is not None:
            shutdown()  # the spans still batched are exported before the process ends


def is_postgres_error(exc: BaseException) -> bool:
    """Whether `exc` is an error PostgreSQL reported (asyncpg's, when a command loaded it)."""
    asyncpg = sys.modules.get("asyncpg")
    return asyncpg is not None and isinstance(exc, asyncpg.PostgresError)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    front.answer_at_once(argv)
    # pydantic's scan of the installed packages for its plugins, which jobdesk does not use, is
    # skipped, unless the user asked for plugins by setting the variable (empty: every plugin).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if GROUP_OF[args.command] == "jobs":
        group_module("jobs").check_args(parser, args)
    keeper_args = group_module("database").keeper_call(parser, args) if args.command == "db" else None
    if keeper_args is not None:
        from jobdesk.embedded.keeper import main as keeper_main

        return keeper_main(keeper_args)
    debug = bool(os.environ.get("JOBDESK_DEBUG"))
    try:
        return run_command(args)
    except (MissingExtra, ReadOnlyRole) as exc:  # its message is the whole line
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    except JobdeskError as exc:
        print(f"jobdesk: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if is_postgres_error(exc):
            print(f"jobdesk: database error: {str(exc).splitlines()[0]}", file=sys.stderr)
            return EXIT_ERROR
        if debug:
            raise
        print(f"jobdesk: internal error: {type(exc).__name__}: {exc} (set JOBDESK_DEBUG=1 for details)",
              file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
