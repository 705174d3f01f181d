"""`jobdesk event emit KEY --payload JSON`: wake the jobs that wait for an event."""

from __future__ import annotations

import argparse
import json

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import print_json
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.json_value import JsonValue


def _payload_arg(text: str) -> JsonValue:
    try:
        value: JsonValue = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--payload is not valid JSON: {exc}") from None
    return value


def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """event emit."""
    p = sub.add_parser("event", parents=[common], help="emit an event that durable jobs wait for")
    actions = p.add_subparsers(dest="event_action", metavar="ACTION", required=True, parser_class=ArgumentParser)
    emit = actions.add_parser("emit", parents=[common],
                              help="emit event KEY: every job waiting on it wakes (the first emit of a key wins)")
    emit.add_argument("key", metavar="KEY")
    emit.add_argument("--payload", type=_payload_arg, default=None, metavar="JSON",
                      help="the event's JSON payload, which the waiting jobs receive (default null)")


async def cmd_event(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        first = await jobs.emit_event(args.key, args.payload)
    if args.json:
        print_json({"key": args.key, "first": first})
    elif first:
        print(f"event {args.key} emitted")
    else:
        print(f"event {args.key} was emitted before; the first emit stands, nothing changed")
    return 0


COMMANDS: dict[str, Command] = {"event": cmd_event}
