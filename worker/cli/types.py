"""`jobdesk types`: every known job type, paused or not, with its limits in force and where each
came from; `jobdesk types pause|resume TYPE` across the fleet, and `jobdesk types set TYPE` for
its limits and rates at run time."""

from __future__ import annotations

import argparse

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import print_json, print_rows
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.type_controls import LIMIT_NAMES, TypeControl

# What `--limit none` (and the others) means: clear the operator's value, the setting's is in force.
CLEAR_WORD = "none"


def add_parsers(sub: Subparsers, group_common: ArgumentParser) -> None:
    p = sub.add_parser("types", parents=[group_common],
                       help="job types: paused or not, their limits and rates; pause, resume, set limits")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=ArgumentParser)
    common = ArgumentParser(add_help=False)  # `--json` before the verb or after it (see `schedule`)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts")
    pause = verbs.add_parser("pause", parents=[common], help="pause a type across the fleet: its jobs stay queued")
    pause.add_argument("type", metavar="TYPE")
    pause.add_argument("--reason", metavar="TEXT", help="why, for the audit log and the jobs' waiting reason")
    resume = verbs.add_parser("resume", parents=[common], help="resume a paused type: workers claim it again at once")
    resume.add_argument("type", metavar="TYPE")
    limits = verbs.add_parser("set", parents=[common],
                              help="set a type's limits and rates at run time (stored in the database)")
    limits.add_argument("type", metavar="TYPE")
    limits.add_argument("--limit", metavar="N", help="jobs of TYPE in progress across the fleet (0: none start)")
    limits.add_argument("--rate", metavar="N/P", help="starts across the fleet, like 10/s, 100/m or 1000/h")
    limits.add_argument("--user-limit", metavar="N", help="jobs of TYPE in progress per user")
    limits.add_argument("--user-rate", metavar="N/P", help="starts per user, like 2/s")
    limits.add_argument("--clear", action="store_true",
                        help="clear every limit set here first: the JOB_* settings are in force again "
                             f"(or `--limit {CLEAR_WORD}` and the like for one)")


def _changes(args: argparse.Namespace) -> dict[str, object]:
    """The limits given, by their names; `none` clears one."""
    given = {name: getattr(args, name) for name in LIMIT_NAMES if getattr(args, name) is not None}
    return {k: None if str(v).strip().lower() == CLEAR_WORD else v for k, v in given.items()}


async def cmd_types(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        if args.verb == "pause":
            records = [await jobs.pause_type(args.type, args.reason)]
        elif args.verb == "resume":
            records = [await jobs.resume_type(args.type)]
        elif args.verb == "set":
            records = [await jobs.set_type_limits(args.type, _changes(args), clear=args.clear)]
        else:
            records = await jobs.types()
    if args.json:
        print_json({"types": [r.to_json() for r in records]} if args.verb is None else records[0].to_json())
    elif args.verb is None:
        _print_types(records)
    else:
        print(_one_line(records[0]))
    return 0


def _limits_text(record: TypeControl) -> str:
    parts = [f"{name} {held.value} from {held.source}" for name in LIMIT_NAMES
             if (held := record.limit(name)).value is not None]
    return ", ".join(parts) or "no limits"


def _one_line(record: TypeControl) -> str:
    if record.paused:
        why = f": {record.reason}" if record.reason else ""
        state = f"paused by {record.paused_by}{why}"
    else:
        state = "not paused"
    return f"type {record.type}: {state}; {_limits_text(record)}"


def _print_types(records: list[TypeControl]) -> None:
    if not records:
        print("no known types")
        return
    rows: list[tuple[str, ...]] = [("TYPE", "STATE", "LIMIT", "RATE", "USER LIMIT", "USER RATE", "SOURCE")]
    for r in records:
        state = f"paused by {r.paused_by}" if r.paused else "active"
        values = [str(r.limit(n).value) if r.limit(n).value is not None else "-" for n in LIMIT_NAMES]
        sources = sorted({s for n in LIMIT_NAMES if (s := r.limit(n).source)})
        rows.append((r.type, state, *values, "; ".join(sources) or "-"))
    print_rows(rows)


COMMANDS: dict[str, Command] = {"types": cmd_types}
