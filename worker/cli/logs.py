"""`jobdesk logs JOB_ID [--follow]`: the log lines a job's processor emitted, every attempt's."""

from __future__ import annotations

import json

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import print_json
from jobdesk.cli.session import Command, Invocation
from jobdesk.service.read_models import JobLogLine


def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """logs."""
    p = sub.add_parser("logs", parents=[common], help="print the log lines a job's processor emitted")
    p.add_argument("id", metavar="JOB_ID")
    p.add_argument("--follow", "-f", action="store_true",
                   help="keep printing lines as they are written, until the job has finished")


def format_line(line: JobLogLine) -> str:
    """`05:20:01.123 #1 INFO    my.app: message`, in local time."""
    return f"{line.at.astimezone():%Y-%m-%d %H:%M:%S.%f}"[:-3] + \
        f" #{line.attempt} {line.level:<7} {line.logger}: {line.message}"


async def cmd_logs(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        job_id = await jobs.resolve_job_id(args.id)
        if not args.follow:
            lines = await jobs.job_logs(job_id)
            if args.json:
                print_json({"job_id": job_id, "lines": [line.to_json() for line in lines]})
            else:
                for line in lines:
                    print(format_line(line))
            return 0
        async for batch in jobs.follow_logs(job_id):  # one JSON object per line with --json
            for line in batch:
                print(json.dumps(line.to_json()) if args.json else format_line(line), flush=True)
    return 0


COMMANDS: dict[str, Command] = {"logs": cmd_logs}
