"""`jobdesk api` (serve the HTTP API) and `jobdesk token create|list|revoke` (its tokens)."""

from __future__ import annotations

import argparse
import json

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import ago, print_json, print_rows
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.extras import require_extra
from jobdesk.store.tokens import SCOPES


def _api_workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"--workers takes a number of processes from 1 to 64, not {text!r}")
    return int(text)


def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """api, token."""
    p = sub.add_parser("api", parents=[common], help="serve the HTTP API")
    p.add_argument("--host", help="address to listen on (default JOBDESK_API_HOST, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default JOBDESK_API_PORT, 8000)")
    p.add_argument("--processors", action="extend", nargs="+", default=[], metavar="MODULE",
                   help="modules with a PROCESSOR_MAP (one or more), to check inputs at enqueue")
    p.add_argument("--no-auth", action="store_true", help="no tokens needed (loopback hosts only)")
    p.add_argument("--workers", type=_api_workers, metavar="N",
                   help="processes serving the port (default JOBDESK_API_WORKERS, 1)")

    p = sub.add_parser("token", help="manage the HTTP API's tokens")
    tsub = p.add_subparsers(dest="token_command", metavar="ACTION", parser_class=ArgumentParser, required=True)
    t = tsub.add_parser("create", parents=[common], help="make a token; it is printed once")
    t.add_argument("--name", required=True)
    t.add_argument("--user", type=int, metavar="ID", help="bind it to a user: it sees that user's jobs only")
    t.add_argument("--scope", action="append", default=[], choices=list(SCOPES),
                   help="repeatable; every scope when not given")
    tsub.add_parser("list", parents=[common], help="list the live tokens")
    t = tsub.add_parser("revoke", parents=[common], help="revoke a token at once")
    t.add_argument("name", metavar="NAME")


def cmd_api(inv: Invocation) -> int:
    """Serve until stopped. The server chooses the database itself, after its checks that need
    none (--no-auth off a loopback host)."""
    require_extra("api", "jobdesk api")
    from jobdesk.api.server import run
    from jobdesk.core.input_validation import make_validator
    from jobdesk.runtime.registry import load_processor_classes

    args, settings = inv.args, inv.settings
    # The processors a worker would load: their input models check inputs at enqueue (422).
    modules = [*settings.JOB_PROCESSOR_MODULES, *args.processors]
    validator = make_validator(load_processor_classes(modules, settings.JOB_PROCESSOR_PATH))
    host = args.host or settings.JOBDESK_API_HOST
    port = settings.JOBDESK_API_PORT if args.port is None else args.port
    workers = settings.JOBDESK_API_WORKERS if args.workers is None else args.workers
    return run(settings, host, port, auth=not args.no_auth, validate_input=validator, workers=workers)


async def cmd_token(inv: Invocation) -> int:
    args = inv.args
    action = args.token_command  # the sub-command's name, not a secret
    async with inv.service() as jobs:
        if action == "create":
            token = await jobs.create_token(args.name, user_id=args.user, scopes=args.scope or None)
        elif action == "list":
            records = await jobs.list_tokens()
        else:
            await jobs.revoke_token(args.name)
    if action == "create":
        print(json.dumps({"token": token, "name": args.name}) if args.json else token)
    elif action == "list":
        if args.json:
            print_json([r.to_json() for r in records])
        elif not records:
            print("no tokens")
        else:
            print_rows([("NAME", "USER", "SCOPES", "CREATED")] + [
                (r.name, "-" if r.user_id is None else str(r.user_id), ",".join(sorted(r.scopes)),
                 ago(r.created_at)) for r in records])
    elif args.json:
        print_json({"revoked": args.name})
    else:
        print(f"revoked token {args.name}")
    return 0


COMMANDS: dict[str, Command] = {"api": cmd_api, "token": cmd_token}
