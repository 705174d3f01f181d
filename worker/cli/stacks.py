"""`jobdesk stack JOB_ID`: what a running job is doing now, its Python stack as a traceback
prints it; after the job has ended, the last stack taken of it."""

from __future__ import annotations

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import print_json
from jobdesk.cli.session import Command, Invocation


def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """stack."""
    p = sub.add_parser("stack", parents=[common],
                       help="print a running job's current Python stack (after it ended, the last one taken)")
    p.add_argument("id", metavar="JOB_ID")


async def cmd_stack(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        stack = await jobs.job_stack(await jobs.resolve_job_id(args.id))  # a short id, as `show` takes
    if args.json:
        print_json(stack.to_json())
    else:
        print(stack.text())
    return 0


COMMANDS: dict[str, Command] = {"stack": cmd_stack}
