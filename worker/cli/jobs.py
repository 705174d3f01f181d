"""`jobdesk submit`, `jobs`, `show`, `cancel`, `retry`, `approve`, `reject` and `demo`: jobs
enqueued, read and acted on, by id or (`--all`) on every job matching a filter."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from jobdesk.cli.arguments import ArgumentParser, Subparsers, json_arg, search_arg, status_arg
from jobdesk.cli.job_output import is_scheduled, print_job, print_table, when_text
from jobdesk.cli.output import print_json
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.durations import parse_seconds
from jobdesk.core.errors import InvalidJob, JobNotFound
from jobdesk.core.models import JobCreate
from jobdesk.core.rules import BULK_ACTIONS
from jobdesk.store.jobs import JobFilter
from jobdesk.store.search_syntax import parse_search

if TYPE_CHECKING:
    from jobdesk.core.input_validation import Validator
    from jobdesk.service.jobs import JobService

# -- arguments ------------------------------------------------------------------------------


def _at_arg(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--at {text!r} is not an ISO time; write it like 2026-03-01T02:00 or 2026-03-01T02:00:00+01:00") from None
    return when if when.tzinfo else when.astimezone()  # no offset: this machine's local time


def _in_arg(text: str) -> float:
    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--in {exc}") from None


def _seconds_arg(flag: str) -> Callable[[str], float]:
    """A duration above 0 (`5s`, `2m`, or seconds) for `flag`."""
    def parse(text: str) -> float:
        try:
            seconds = parse_seconds(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{flag} {exc}") from None
        if seconds <= 0:
            raise argparse.ArgumentTypeError(f"{flag} must be longer than 0 s")
        return seconds
    return parse


def _add_submit_parser(sub: Subparsers, common: ArgumentParser) -> None:
    """jobdesk submit: one job, its time, its key and its debounce."""
    p = sub.add_parser("submit", parents=[common], help="enqueue a job")
    # Optional to argparse alone: `--processors` takes the words after it, TYPE too when it comes
    # after them (`submit --processors myprocs crunch`); `check_args` gives it back to TYPE.
    p.add_argument("type", metavar="TYPE", nargs="?")
    p.add_argument("--input", type=json_arg, default={}, metavar="JSON", help="input_data (a JSON object)")
    p.add_argument("--depends-on", action="append", default=[], metavar="ID", help="repeatable")
    p.add_argument("--user", type=int, metavar="ID")
    p.add_argument("--pipeline", metavar="ID")
    p.add_argument("--priority", type=int, default=0, help="higher runs first")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--at", type=_at_arg, metavar="ISO-TIME",
                      help="run no earlier than this (local time without an offset)")
    when.add_argument("--in", dest="in_", type=_in_arg, metavar="DURATION",
                      help="run no earlier than this long from now (10m)")
    p.add_argument("--unique-key", metavar="KEY",
                   help="create nothing if an unfinished job has this key; print that job's id")
    p.add_argument("--debounce", type=_seconds_arg("--debounce"), metavar="DURATION",
                   help="with --unique-key: a queued job with the key takes this input, starts this long from now (5s)")
    p.add_argument("--debounce-max", type=_seconds_arg("--debounce-max"), metavar="DURATION",
                   help="with --debounce: the start moves at most this far from the first enqueue (1m)")
    p.add_argument("--processors", action="extend", nargs="+", default=[], metavar="MODULE",
                   help="modules with a PROCESSOR_MAP whose input models check --input (one or more)")



def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """demo, submit, jobs, show, cancel, retry, approve, reject."""
    p = sub.add_parser("demo", parents=[common], help="enqueue the demo 'generate video' pipeline")
    p.add_argument("--topic", help="what the demo video is about")
    p.add_argument("--count", type=int, default=1, help="how many pipelines (default 1)")
    p.add_argument("--fast", action="store_true", help="stages take a tenth of their usual time")

    _add_submit_parser(sub, common)

    p = sub.add_parser("jobs", parents=[common], help="list jobs, newest first")
    p.add_argument("--status", type=status_arg)
    p.add_argument("--type")
    p.add_argument("--pipeline")
    p.add_argument("--search", type=search_arg, metavar="QUERY",
                   help='the console\'s search: free text and terms, like \'error:"timeout" input.user.plan:business\'')
    p.add_argument("--limit", type=int, default=50)

    p = sub.add_parser("show", parents=[common], help="show one job with its attempt history")
    p.add_argument("id", metavar="ID")

    for name, what in (("cancel", "cancel jobs and their dependants"),
                       ("retry", "put failed or cancelled jobs back in the queue"),
                       ("approve", "approve jobs waiting for approval"),
                       ("reject", "reject jobs waiting for approval")):
        p = sub.add_parser(name, parents=[common], help=what)
        p.add_argument("ids", nargs="*", metavar="ID")
        if name == "retry":
            p.add_argument("--downstream", action="store_true",
                           help="also retry every failed or cancelled job downstream of them")
            p.add_argument("--fresh", action="store_true",
                           help="retry from scratch: forget the steps a durable processor stored "
                                "(kept by default, so it goes on where it failed)")
            p.add_argument("--input", type=json_arg, metavar="JSON",
                           help="retry one job with this input_data instead (a JSON object); the old input "
                                "is kept in the audit log")
            p.add_argument("--processors", action="extend", nargs="+", default=[], metavar="MODULE",
                           help="with --input: modules with a PROCESSOR_MAP whose input models check it")
        if name == "reject":
            p.add_argument("--reason", required=True, metavar="TEXT")
        _add_bulk_options(p, name)


def _add_bulk_options(p: ArgumentParser, name: str) -> None:
    p.add_argument("--all", action="store_true",
                   help=f"{name} every job matching the filter options (those {name} is legal for), "
                        f"1,000 per transaction")
    p.add_argument("--status", type=status_arg, action="append", default=[],
                   help="with --all: only jobs in this status (repeatable)")
    p.add_argument("--type", help="with --all: only jobs of this type")
    p.add_argument("--pipeline", metavar="P", help="with --all: only jobs of this pipeline")
    p.add_argument("--search", type=search_arg, metavar="QUERY",
                   help="with --all: only jobs matching the console's search, like 'type:video.* error:\"timeout\"' "
                        "(its terms override --status, --type and --pipeline)")
    p.add_argument("--dry-run", action="store_true", help="with --all: count, change nothing")


def check_args(parser: ArgumentParser, args: argparse.Namespace) -> None:
    """What argparse alone cannot check: the word `--processors` took from TYPE (or from the
    job id of `retry --input`), and the bulk options."""
    _after_processors(parser, args)
    _check_bulk_args(parser, args)


def _after_processors(parser: ArgumentParser, args: argparse.Namespace) -> None:
    """`submit --processors myprocs crunch`: `--processors` takes every word after it, so the
    TYPE that follows it, which is missing then, is its last word; so is the one job id of
    `retry --processors myprocs --input JSON ID`."""
    modules: list[str] = getattr(args, "processors", [])
    if args.command == "submit" and args.type is None:
        if len(modules) < 2:
            parser.error("the following arguments are required: TYPE")
        args.type = modules.pop()
    elif args.command == "retry" and args.input is not None and not args.ids and not args.all and len(modules) >= 2:
        args.ids = [modules.pop()]


def _check_bulk_args(parser: ArgumentParser, args: argparse.Namespace) -> None:
    """`retry`, `cancel`, `approve` and `reject` take ids, or --all with filter options; never
    both (exit 2)."""
    if args.command not in BULK_ACTIONS:
        return
    options = [flag for flag, value in (("--status", args.status), ("--type", args.type),
                                        ("--pipeline", args.pipeline), ("--search", args.search),
                                        ("--dry-run", args.dry_run)) if value]
    if args.all and args.ids:
        parser.error(f"{args.command}: give job ids or --all with a filter, not both")
    if args.all and getattr(args, "downstream", False):
        parser.error("retry: --downstream works on job ids, not with --all")
    if getattr(args, "fresh", False) and (args.all or args.downstream):
        parser.error("retry: --fresh works on job ids, not with --all or --downstream")
    if getattr(args, "input", None) is not None and (args.all or args.downstream or len(args.ids) != 1):
        parser.error("retry: --input works on one job id, not with --all or --downstream")
    if not args.all and not args.ids:
        parser.error(f"{args.command}: give job ids, or --all with a filter")
    if not args.all and options:
        parser.error(f"{args.command}: {options[0]} needs --all")


# -- commands -------------------------------------------------------------------------------

def _input_validator(inv: Invocation) -> Validator:
    """The input check of the processors a worker would load (and `--processors`)."""
    from jobdesk.core.input_validation import make_validator
    from jobdesk.runtime.registry import load_processor_classes

    modules = [*inv.settings.JOB_PROCESSOR_MODULES, *inv.args.processors]
    return make_validator(load_processor_classes(modules, inv.settings.JOB_PROCESSOR_PATH))


async def cmd_submit(inv: Invocation) -> int:
    args = inv.args
    # The same processors a worker would load: their input models check the input before enqueueing.
    _input_validator(inv)(args.type, args.input)
    scheduled_at = args.at if args.in_ is None else datetime.now(UTC) + timedelta(seconds=args.in_)
    job = JobCreate(args.type, args.input, dependent_on_jobs=list(args.depends_on), user_id=args.user,
                    pipeline_id=args.pipeline, priority=args.priority, scheduled_at=scheduled_at,
                    unique_key=args.unique_key, debounce=args.debounce, debounce_max=args.debounce_max)
    async with inv.service() as jobs:
        job.dependent_on_jobs = [await _dependency(jobs, given) for given in job.dependent_on_jobs]
        job_id, outcome = await jobs.place(job)
        record = await jobs.get_job(job_id)
        warnings = await jobs.unserved_warnings([job.type])
    duplicate = outcome != "created"  # the unfinished job holding the unique key stands for it
    if args.json:
        extra = {"debounced": outcome == "debounced"} if args.debounce is not None else {}
        print_json({**record.to_json(), "duplicate": duplicate, **extra, "warnings": list(warnings.values())})
    else:
        when = f" (scheduled for {when_text(record.scheduled_at)})" if is_scheduled(record) else ""
        notes = {"duplicate": f" (duplicate: job {job_id} holds key {args.unique_key!r}; nothing created)",
                 "debounced": f" (debounced: job {job_id} holds key {args.unique_key!r}; it took this input)"}
        print(f"{job_id} {record.status.value}{when}{notes.get(outcome, '')}")
    for warning in warnings.values():
        print(f"jobdesk: warning: {warning}", file=sys.stderr)
    return 0


async def _dependency(jobs: JobService, given: str) -> str:
    """`--depends-on` by a part of an id, as the other commands take it; one no job has is left
    for the enqueue to refuse, with its own words."""
    try:
        return await jobs.resolve_job_id(given)
    except JobNotFound:
        return given


def list_filter(args: argparse.Namespace) -> JobFilter:
    """The filter of `jobdesk jobs` and `jobdesk export`: its options, then the `--search` terms."""
    base = JobFilter(statuses=frozenset({args.status}) if args.status else frozenset(), type=args.type,
                     pipeline_id=args.pipeline)
    return parse_search(args.search, base).filter if args.search else base


async def cmd_jobs(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        records, _ = await jobs.job_records_page(list_filter(args), limit=args.limit)
    if args.json:
        print_json([r.to_json() for r in records])
    else:
        print_table(records)
    return 0


async def cmd_show(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        detail = await jobs.job_detail(await jobs.resolve_job_id(args.id))
    if args.json:
        print_json({**detail.job.to_json(), "history": [a.to_json() for a in detail.attempts],
                    "dependants": detail.dependants, "waiting_reason": detail.waiting_reason,
                    "steps": [s.to_json() for s in detail.steps],
                    "progress": detail.progress.to_json() if detail.progress is not None else None})
    else:
        print_job(detail.job, detail.attempts, detail.dependants, detail.waiting_reason, detail.steps,
                   detail.progress)
    return 0


PAST = {"cancel": "cancelled", "retry": "queued again", "approve": "approved", "reject": "rejected"}


def bulk_filter(args: argparse.Namespace) -> JobFilter:
    """The filter of `--all`: its options, then the `--search` terms, as the console's search box
    narrows the job table."""
    base = JobFilter(statuses=frozenset(args.status), type=args.type, pipeline_id=args.pipeline)
    return parse_search(args.search, base).filter if args.search else base


async def cmd_bulk(inv: Invocation) -> int:
    args = inv.args
    filt = bulk_filter(args)
    async with inv.service() as jobs:
        result = await jobs.bulk(args.command, filt, dry_run=args.dry_run, reason=getattr(args, "reason", None))
    count = f"{result.count:,}{'+' if result.capped else ''}"
    if args.json:
        print_json({"action": args.command, "filter": filt.describe(), "dry_run": result.dry_run,
                    "count": result.count, "capped": result.capped, "changed": result.changed,
                    "chunks": result.chunks})
    elif result.dry_run:
        print(f"would {args.command} {count} job(s) matching {filt.describe()}")
    else:
        done = PAST[args.command]
        extra = result.changed - result.count
        more = f" (and {extra:,} dependant job(s))" if extra > 0 else ""
        print(f"{done}: {count} job(s) matching {filt.describe()}{more}, in {result.chunks} transaction(s)")
    return 0


async def cmd_action(inv: Invocation) -> int:
    args = inv.args
    if getattr(args, "all", False):
        return await cmd_bulk(inv)
    async with inv.service() as jobs:
        ids = await jobs.resolve_job_ids(args.ids)  # every id first: an ambiguous one changes nothing
        if args.command == "reject":
            changed = await jobs.reject(ids, args.reason)
        elif args.command == "retry" and args.downstream:
            changed = await jobs.retry_downstream(ids)
        elif args.command == "retry" and args.input is not None:
            changed = await jobs.retry_with_input(ids[0], args.input, fresh=args.fresh,
                                                  validate=_input_validator(inv))
        elif args.command == "retry":
            changed = await jobs.retry(ids, fresh=args.fresh)
        else:
            changed = await getattr(jobs, args.command)(ids)
    again = "queued again from scratch" if getattr(args, "fresh", False) else "queued again"
    if getattr(args, "input", None) is not None:
        again += " with the new input"
    past = {**PAST, "retry": again}
    if args.json:
        print_json({"action": args.command, "jobs": changed})
    else:
        extra = len(changed) - len(set(ids))
        more = f" (and {extra} dependant job(s))" if extra > 0 else ""
        print(f"{past[args.command]}: {', '.join(ids)}{more}")
    return 0


async def cmd_demo(inv: Invocation) -> int:
    from jobdesk.processors.demo_video import demo_pipeline

    args = inv.args
    if args.count < 1:
        raise InvalidJob("--count must be at least 1")
    options = {"duration_scale": 0.1} if args.fast else {}
    async with inv.service() as jobs:
        pipelines = [demo_pipeline(args.topic, **options) for _ in range(args.count)]
        await jobs.enqueue_many(pipelines)
    ids = [j.pipeline_id for j in pipelines]
    if args.json:
        print_json({"pipelines": ids})
    else:
        for pid in ids:
            print(f"demo pipeline {pid} enqueued (stages: script -> voice + image -> video -> compositing)")
    return 0


COMMANDS: dict[str, Command] = {
    "submit": cmd_submit, "jobs": cmd_jobs, "show": cmd_show, "cancel": cmd_action, "retry": cmd_action,
    "approve": cmd_action, "reject": cmd_action, "demo": cmd_demo}
