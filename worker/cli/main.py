"""`jobdesk`: the command line's parser and dispatch. Each command group is a module of its own
(jobs, pipelines, workers, schedules, types, database, api); bad input gets one line on stderr and a
non-zero exit code."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence

import asyncpg

from jobdesk.cli import api, database, doctor, events, jobs, logs, pipelines, schedules, sharing, types, workers
from jobdesk.cli.arguments import EXIT_ERROR, ArgumentParser, Subparsers
from jobdesk.cli.jobs import check_bulk_args
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.errors import JobdeskError
from jobdesk.core.extras import MissingExtra
from jobdesk.core.settings import load_settings
from jobdesk.core.version import __version__
from jobdesk.observe import otel_setup

COMMANDS: dict[str, Command] = {**database.COMMANDS, **workers.COMMANDS, **jobs.COMMANDS, **pipelines.COMMANDS,
                                **api.COMMANDS, **schedules.COMMANDS, **types.COMMANDS, **events.COMMANDS,
                                **doctor.COMMANDS, **sharing.COMMANDS, **logs.COMMANDS}

# Each group adds its commands' parsers, in the order `jobdesk --help` lists them.
PARSERS: tuple[Callable[[Subparsers, ArgumentParser], None], ...] = (
    database.add_setup_parsers, workers.add_worker_parser, jobs.add_parsers, logs.add_parsers, sharing.add_parsers,
    workers.add_fleet_parser, pipelines.add_parsers, database.add_upkeep_parsers, workers.add_control_parser,
    api.add_parsers, schedules.add_parsers, types.add_parsers, events.add_parsers, doctor.add_parsers)


def build_parser() -> ArgumentParser:
    common = ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser = ArgumentParser(prog="jobdesk", description="A job system on PostgreSQL.")
    parser.add_argument("--version", action="version", version=f"jobdesk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for add in PARSERS:
        add(sub, common)
    return parser


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    # While the database is away, asyncpg's pool logs a traceback every second as it retries; the
    # worker already says once that the database is unreachable, and again when it is back.
    logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command; its failures are the caller's to report."""
    settings = load_settings()
    setup_logging(settings.LOG_LEVEL if args.command == "worker" else "WARNING")
    # Traces when OTEL_TRACES_EXPORTER asks for them: the worker's runs, the CLI's enqueues. The
    # API sets them up in each process that serves (jobdesk.api.server).
    service = "jobdesk-worker" if args.command == "worker" else "jobdesk-cli"
    shutdown = otel_setup.configure_from_env(service) if args.command != "api" else None
    try:
        outcome = COMMANDS[args.command](Invocation(args, settings))
        return outcome if isinstance(outcome, int) else asyncio.run(outcome)
    finally:
        if shutdown is not None:
            shutdown()  # the spans still batched are exported before the process ends


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_bulk_args(parser, args)
    if args.command is None:
        parser.print_help()
        return 0
    keeper_args = database.keeper_call(parser, args)
    if keeper_args is not None:
        from jobdesk.embedded.keeper import main as keeper_main

        return keeper_main(keeper_args)
    debug = bool(os.environ.get("JOBDESK_DEBUG"))
    try:
        return run_command(args)
    except MissingExtra as exc:  # its message is the whole line, with the pip command
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    except JobdeskError as exc:
        print(f"jobdesk: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except asyncpg.PostgresError as exc:
        print(f"jobdesk: database error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if debug:
            raise
        print(f"jobdesk: internal error: {type(exc).__name__}: {exc} (set JOBDESK_DEBUG=1 for details)",
              file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
