"""`jobdesk pipelines` and `jobdesk cancel-pipeline`."""

from __future__ import annotations

from datetime import UTC, datetime

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import ago, cut, print_json, print_rows
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import short_id
from jobdesk.core.timefmt import span
from jobdesk.store.pipelines import PipelineFilter, PipelineStatus


def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """pipelines, cancel-pipeline."""
    p = sub.add_parser("pipelines", parents=[common], help="list pipelines, newest first, with progress")
    p.add_argument("--status", choices=[s.value for s in PipelineStatus], action="append", default=[],
                   help="repeatable")
    p.add_argument("--search", metavar="TEXT", help="part of a pipeline's name or id")
    p.add_argument("--limit", type=int, default=50)
    p = sub.add_parser("cancel-pipeline", parents=[common], help="cancel every unfinished job of a pipeline")
    p.add_argument("id", metavar="PIPELINE_ID")


async def cmd_pipelines(inv: Invocation) -> int:
    args = inv.args
    if args.limit < 1:
        raise InvalidJob("--limit must be at least 1")
    filt = PipelineFilter(statuses=frozenset(PipelineStatus(s) for s in args.status), search=args.search)
    async with inv.service() as jobs:
        rows, more = await jobs.pipelines(filt, limit=args.limit)
    if args.json:
        print_json([{**r.__dict__, "finished": r.finished} for r in rows])
        return 0
    if not rows:
        print("no pipelines")
        return 0
    now = datetime.now(UTC)
    table = [("ID", "NAME", "STATUS", "PROGRESS", "STARTED", "DURATION")]
    table += [(short_id(r.pipeline_id), cut(r.name, 40), r.status.value, f"{r.completed}/{r.total}",
               ago(r.started_at), span(r.duration_s(now))) for r in rows]
    print_rows(table)
    if more:
        print(f"(first {args.limit}; use --limit or --status to see others)")
    return 0


async def cmd_cancel_pipeline(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        changed = await jobs.cancel_pipeline(args.id)
    if args.json:
        print_json({"action": "cancel-pipeline", "pipeline": args.id, "jobs": changed})
    else:
        print(f"cancelled {len(changed)} job(s) of pipeline {args.id}")
    return 0


COMMANDS: dict[str, Command] = {"pipelines": cmd_pipelines, "cancel-pipeline": cmd_cancel_pipeline}
