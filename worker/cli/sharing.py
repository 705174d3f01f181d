"""`jobdesk export` and `jobdesk open`: what an operator sees, shared: the jobs a filter matches
written to stdout (CSV or JSON lines), and the console opened on one job."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from importlib import import_module  # noqa: TID251 - the console, named: a headless engine has no Qt

from jobdesk.cli.arguments import ArgumentParser, Subparsers, search_arg, status_arg
from jobdesk.cli.jobs import list_filter
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.extras import require_extra


def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """export, open."""
    p = sub.add_parser("export", help="write every column of the jobs matching the filter to stdout, id first")
    p.add_argument("--format", choices=("csv", "jsonl"), default="csv",
                   help="csv (a header row, quoted where needed; the default) or jsonl (one JSON object a line)")
    p.add_argument("--status", type=status_arg)
    p.add_argument("--type")
    p.add_argument("--pipeline")
    p.add_argument("--search", type=search_arg, metavar="QUERY", help="the console's search, as in `jobdesk jobs`")

    p = sub.add_parser("open", help="open the console on one job (an id that does not exist opens nothing)")
    p.add_argument("id", metavar="JOB_ID")
    p.add_argument("--read-only", action="store_true", help="browse only; no actions")
    p.add_argument("--no-worker", action="store_true", help="do not start a worker on the embedded database")


async def cmd_export(inv: Invocation) -> int:
    """Stream the jobs to stdout, newest first, a page at a time."""
    async with inv.service() as jobs:
        await jobs.export_jobs(list_filter(inv.args), inv.args.format, sys.stdout)
    sys.stdout.flush()
    return 0


def cmd_open(inv: Invocation) -> int:
    """Find the job (one line and exit 1 if none, or more than one, before any window), then run the
    console on it. The console is named, not imported: the engine's import graph has no Qt."""
    async def resolve() -> str:
        async with inv.service() as jobs:
            return await jobs.resolve_job_id(inv.args.id)

    job_id = asyncio.run(resolve())
    require_extra("console", "the jobdesk console")
    flags = [flag for flag, on in (("--read-only", inv.args.read_only), ("--no-worker", inv.args.no_worker)) if on]
    console: Callable[[list[str]], int] = import_module("jobdesk.console.app").main
    return console([*flags, "--job", job_id])


COMMANDS: dict[str, Command] = {"export": cmd_export, "open": cmd_open}
