"""`jobdesk grant viewer|operator ROLE`: make an existing PostgreSQL role a viewer (reads what the
console, `jobs`, `show`, `logs`, `stack`, `types` and `stats` read; changes nothing) or an operator
(acts on jobs too). Run it as the owner of jobdesk's tables, after `jobdesk migrate`."""

from __future__ import annotations

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import print_json
from jobdesk.cli.session import Command, Invocation
from jobdesk.store.grants import LEVELS

SAYS = {"viewer": "reads jobdesk's tables (not the API's tokens) and changes nothing",
        "operator": "reads and changes jobdesk's tables: acts on jobs, types, schedules and workers"}


def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    p = sub.add_parser("grant", parents=[common],
                       help="make a PostgreSQL role a viewer (read-only) or an operator of jobdesk")
    p.add_argument("level", choices=LEVELS, metavar="viewer|operator")
    p.add_argument("role", metavar="ROLE", help="an existing role (CREATE ROLE ... LOGIN)")


async def cmd_grant(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        owner = await jobs.grant_role(args.level, args.role)
    if args.json:
        print_json({"role": args.role, "level": args.level, "owner": owner})
    else:
        print(f"role {args.role} is a jobdesk {args.level} on {inv.database.describe()}: it {SAYS[args.level]}; "
              f"tables that {owner} adds later are covered too")
    return 0


COMMANDS: dict[str, Command] = {"grant": cmd_grant}
