"""`jobdesk`: the command line. Bad input gets one line on stderr and a non-zero exit code."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import asyncpg

from worker.core.durations import parse_duration, parse_seconds
from worker.core.errors import InvalidJob, JobdeskError
from worker.core.limits import parse_type_limit
from worker.core.models import JobRecord, Status, new_job_id, short_id
from worker.core.schedules import MISFIRE_POLICIES, OVERLAP_POLICIES, Schedule
from worker.core.settings import Settings, load_settings
from worker.core.timefmt import relative, span
from worker.core.version import __version__
from worker.runtime.retention import PRUNABLE
from worker.service.client import JobClient
from worker.service.jobs import Attempt, migrate_database, prepare_schema
from worker.store.db import Database
from worker.store.jobs import JobFilter
from worker.store.pipelines import PipelineFilter, PipelineStatus
from worker.store.stats import BadWindow, Window, parse_window
from worker.store.transitions import BULK_ACTIONS, WORKER_COMMANDS_LEGAL_FROM

EXIT_ERROR = 1
EXIT_USAGE = 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, not the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"jobdesk: error: {message} (see `{self.prog} --help`)\n")


def _json_arg(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--input is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--input must be a JSON object, like '{\"key\": 1}'")
    return value


def _status_arg(text: str) -> Status:
    try:
        return Status(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown status {text!r}; use one of {', '.join(s.value for s in Status)}") from None


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


def _limit_arg(text: str) -> dict[str, int]:
    try:
        return parse_type_limit(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--limit {exc}") from None


def _api_workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"--workers takes a number of processes from 1 to 64, not {text!r}")
    return int(text)


def _duration_arg(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--older-than {exc}") from None
    if seconds is None:
        raise argparse.ArgumentTypeError("--older-than forever would prune nothing; give a duration like 7d")
    return seconds


def _window_arg(text: str) -> Window:
    try:
        return parse_window(text)
    except BadWindow as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> ArgumentParser:
    common = ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser = ArgumentParser(prog="jobdesk", description="A job system on PostgreSQL.")
    parser.add_argument("--version", action="version", version=f"jobdesk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)

    sub.add_parser("migrate", parents=[common], help="apply the schema migrations")
    p = sub.add_parser("db", parents=[common],
                       help="the embedded PostgreSQL: run it in the foreground, or `db status`, `db stop`")
    p.add_argument("action", nargs="?", metavar="status|stop",
                   help="status: whether it runs, its DATABASE_URL, clients and idle time; stop: stop it now")
    p.add_argument("keeper_args", nargs="*", help=argparse.SUPPRESS)  # of the hidden `db keeper`
    p.add_argument("--force", action="store_true", help="with stop: stop it even while clients use it")

    p = sub.add_parser("worker", parents=[common], help="run a worker")
    p.add_argument("--processors", action="extend", nargs="+", default=[], metavar="MODULE",
                   help="modules with a PROCESSOR_MAP (one or more; repeatable)")
    p.add_argument("--concurrency", type=int, metavar="N", help="override MAX_CONCURRENT_JOBS")
    p.add_argument("--metrics-port", type=int, metavar="P",
                   help="serve Prometheus metrics on this port (overrides JOB_METRICS_PORT)")
    p.add_argument("--limit", type=_limit_arg, action="append", default=[], metavar="TYPE=N",
                   help="run at most N jobs of TYPE at once in this worker (repeatable)")

    p = sub.add_parser("demo", parents=[common], help="enqueue the demo 'generate video' pipeline")
    p.add_argument("--topic", help="what the demo video is about")
    p.add_argument("--count", type=int, default=1, help="how many pipelines (default 1)")
    p.add_argument("--fast", action="store_true", help="stages take a tenth of their usual time")

    p = sub.add_parser("submit", parents=[common], help="enqueue a job")
    p.add_argument("type", metavar="TYPE")
    p.add_argument("--input", type=_json_arg, default={}, metavar="JSON", help="input_data (a JSON object)")
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
    p.add_argument("--processors", action="extend", nargs="+", default=[], metavar="MODULE",
                   help="modules with a PROCESSOR_MAP whose input models check --input (one or more)")

    p = sub.add_parser("jobs", parents=[common], help="list jobs, newest first")
    p.add_argument("--status", type=_status_arg)
    p.add_argument("--type")
    p.add_argument("--pipeline")
    p.add_argument("--limit", type=int, default=50)

    p = sub.add_parser("show", parents=[common], help="show one job with its attempt history")
    p.add_argument("id", metavar="ID")

    for name, what in (("cancel", "cancel jobs and their dependants"),
                       ("retry", "put failed or cancelled jobs back in the queue"),
                       ("approve", "approve jobs waiting for approval")):
        p = sub.add_parser(name, parents=[common], help=what)
        p.add_argument("ids", nargs="*" if name in BULK_ACTIONS else "+", metavar="ID")
        if name == "retry":
            p.add_argument("--downstream", action="store_true",
                           help="also retry every failed or cancelled job downstream of them")
        if name in BULK_ACTIONS:
            p.add_argument("--all", action="store_true",
                           help=f"{name} every job matching the filter options (those {name} is legal for), "
                                f"1,000 per transaction")
            p.add_argument("--status", type=_status_arg, action="append", default=[],
                           help="with --all: only jobs in this status (repeatable)")
            p.add_argument("--type", help="with --all: only jobs of this type")
            p.add_argument("--pipeline", metavar="P", help="with --all: only jobs of this pipeline")
            p.add_argument("--dry-run", action="store_true", help="with --all: count, change nothing")
    p = sub.add_parser("reject", parents=[common], help="reject jobs waiting for approval")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--reason", required=True, metavar="TEXT")
    sub.add_parser("workers", parents=[common], help="list workers and what they run")
    p = sub.add_parser("pipelines", parents=[common], help="list pipelines, newest first, with progress")
    p.add_argument("--status", choices=[s.value for s in PipelineStatus], action="append", default=[],
                   help="repeatable")
    p.add_argument("--search", metavar="TEXT", help="part of a pipeline's name or id")
    p.add_argument("--limit", type=int, default=50)
    p = sub.add_parser("cancel-pipeline", parents=[common], help="cancel every unfinished job of a pipeline")
    p.add_argument("id", metavar="PIPELINE_ID")
    p = sub.add_parser("prune", parents=[common], help="delete finished jobs past their retention now")
    p.add_argument("--dry-run", action="store_true", help="count what would be deleted; change nothing")
    p.add_argument("--older-than", type=_duration_arg, metavar="DURATION",
                   help="instead of the JOB_RETENTION_* settings: 90s, 12h, 7d, ...")
    p.add_argument("--status", action="extend", nargs="+", default=[], metavar="S", choices=PRUNABLE,
                   help=f"only these ({', '.join(PRUNABLE)}; default all)")
    p = sub.add_parser("stats", parents=[common], help="throughput, queue depth and wait/run times")
    p.add_argument("--since", type=_window_arg, default=parse_window("1h"), metavar="SPAN",
                   help="the window: 15m, 1h (default), 24h, 7d… up to 30d")
    p = sub.add_parser("worker-ctl", parents=[common], help="pause, resume, drain or stop a worker")
    p.add_argument("id", metavar="ID")
    p.add_argument("action", metavar="ACTION", choices=list(WORKER_COMMANDS_LEGAL_FROM),
                   help=", ".join(WORKER_COMMANDS_LEGAL_FROM))
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
    t.add_argument("--scope", action="append", default=[], choices=["read", "submit", "operate", "approve"],
                   help="repeatable; every scope when not given")
    tsub.add_parser("list", parents=[common], help="list the live tokens")
    t = tsub.add_parser("revoke", parents=[common], help="revoke a token at once")
    t.add_argument("name", metavar="NAME")
    _schedule_parser(sub, common)
    return parser


def _interval_arg(text: str) -> float:
    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _schedule_parser(sub: Any, group_common: ArgumentParser) -> None:
    p = sub.add_parser("schedule", parents=[group_common], help="periodic jobs: add, list, pause, resume, remove")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=ArgumentParser, required=True)
    # `--json` before the verb or after it: the verb's parser must not put back a False default
    # over the True that `schedule --json` already set.
    common = ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts")
    add = verbs.add_parser("add", parents=[common], help="add a schedule")
    add.add_argument("name", metavar="NAME")
    rule = add.add_mutually_exclusive_group(required=True)
    rule.add_argument("--cron", metavar="EXPR", help="a cron expression, like '0 2 * * *'")
    rule.add_argument("--every", type=_interval_arg, metavar="DURATION", help="an interval, like 30s, 10m or 1h")
    add.add_argument("--type", required=True, metavar="T", help="the job type to enqueue at each tick")
    add.add_argument("--input", type=_json_arg, default={}, metavar="JSON", help="input_data of each job")
    add.add_argument("--timezone", default="UTC", metavar="TZ", help="the cron expression's timezone (default UTC)")
    add.add_argument("--misfire", choices=list(MISFIRE_POLICIES), default="skip",
                     help="after downtime: skip missed ticks (default), run once, or run all (at most 100)")
    add.add_argument("--overlap", choices=list(OVERLAP_POLICIES), default="allow",
                     help="skip: no new job while the previous one is unfinished")
    add.add_argument("--priority", type=int, default=0, help="higher runs first")
    verbs.add_parser("list", parents=[common], help="list schedules with their next and last run")
    for verb, what in (("pause", "pause a schedule"), ("resume", "resume a paused schedule"),
                       ("remove", "remove a schedule"), ("jobs", "the jobs a schedule created, newest first")):
        v = verbs.add_parser(verb, parents=[common], help=what)
        v.add_argument("name", metavar="NAME")


# -- output ---------------------------------------------------------------------------------

def _ago(when: datetime | None) -> str:
    return relative(when) or "-"


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _print_rows(rows: Sequence[Sequence[str]]) -> None:
    """Aligned columns; the first row is the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def _print_table(records: Sequence[JobRecord]) -> None:
    if not records:
        print("no jobs")
        return
    rows = [("ID", "TYPE", "STATUS", "TRIES", "CREATED", "ERROR")]
    for r in records:
        error = (r.error_message or "").splitlines()[0][:60] if r.error_message else ""
        status = f"scheduled {_ago(r.scheduled_at)}" if _is_scheduled(r) else r.status.value
        rows.append((short_id(r.id), r.type[:24], status, str(r.retry_count), _ago(r.created_at), error))
    _print_rows(rows)


def _is_scheduled(record: JobRecord) -> bool:
    """Queued with a scheduled time still to come."""
    return (record.status == Status.QUEUED and record.scheduled_at is not None
            and record.scheduled_at > datetime.now(UTC))


def _when(at: datetime | None) -> str:
    return f"{at.astimezone():%Y-%m-%d %H:%M:%S %z} ({_ago(at)})" if at else "-"


def _print_job(record: JobRecord, attempts: list[Attempt], dependants: list[str],
               waiting: str | None = None) -> None:
    fields = [("id", record.id), ("type", record.type), ("status", record.status.value),
              ("user", record.user_id), ("pipeline", record.pipeline_id or "-"),
              ("retries", record.retry_count), ("attempts", record.attempts),
              ("active", "yes" if record.is_active else "no"),
              ("created", f"{record.created_at:%Y-%m-%d %H:%M:%S} ({_ago(record.created_at)})"),
              ("updated", f"{record.updated_at:%Y-%m-%d %H:%M:%S} ({_ago(record.updated_at)})")]
    if record.completed_at:
        fields.append(("completed", f"{record.completed_at:%Y-%m-%d %H:%M:%S} ({_ago(record.completed_at)})"))
    if record.scheduled_at:
        fields.append(("scheduled", _when(record.scheduled_at)))
    if record.unique_key is not None:
        fields.append(("unique key", record.unique_key))
    if record.next_retry_at and record.status == Status.QUEUED:
        fields.append(("next retry", _ago(record.next_retry_at)))
    if waiting:
        fields.append(("waiting", waiting))
    if record.dependent_on_jobs:
        fields.append(("depends on", ", ".join(record.dependent_on_jobs)))
    if dependants:
        fields.append(("dependants", ", ".join(dependants)))
    if record.error_message:
        fields.append(("error", record.error_message))
    for key, value in fields:
        print(f"{key:>11}  {value}")
    print(f"{'input':>11}  {json.dumps(record.input_data)}")
    if record.result_data is not None:
        print(f"{'result':>11}  {json.dumps(record.result_data)}")
    if attempts:
        print("history:")
        for a in attempts:
            print(f"  #{a.attempt} {a.outcome:<11} {a.finished_at:%Y-%m-%d %H:%M:%S}  {a.error_message or ''}")


# -- commands -------------------------------------------------------------------------------

async def _client(settings: Settings) -> JobClient:
    return await JobClient.connect(settings=settings, source="cli", pool_size=2)


async def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    target = Database.resolve(settings)
    applied = await migrate_database(target.dsn)
    names = [f"{m.version:03d}_{m.name}" for m in applied]
    if args.json:
        _print_json({"applied": names, "database": target.describe()})
    elif names:
        print(f"applied {len(names)} migration(s) to {target.describe()}: {', '.join(names)}")
    else:
        print(f"{target.describe()} is up to date")
    return 0


async def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    from worker.core.input_validation import make_validator
    from worker.runtime.registry import load_processor_classes

    # The same processors a worker would load: their input models check the input before enqueueing.
    modules = [*settings.JOB_PROCESSOR_MODULES, *args.processors]
    make_validator(load_processor_classes(modules, settings.JOB_PROCESSOR_PATH))(args.type, args.input)
    scheduled_at = args.at if args.in_ is None else datetime.now(UTC) + timedelta(seconds=args.in_)
    new_id = new_job_id()
    client = await _client(settings)
    try:
        job_id = await client.enqueue(args.type, args.input, depends_on=args.depends_on, user_id=args.user,
                                      pipeline_id=args.pipeline, priority=args.priority, id=new_id,
                                      scheduled_at=scheduled_at, unique_key=args.unique_key)
        record = await client.get_job(job_id)
    finally:
        await client.close()
    duplicate = job_id != new_id  # the unfinished job holding the unique key stands for it
    if args.json:
        _print_json({**record.to_json(), "duplicate": duplicate})
    else:
        when = f" (scheduled for {_when(record.scheduled_at)})" if _is_scheduled(record) else ""
        note = f" (duplicate: job {job_id} holds key {args.unique_key!r}; nothing created)" if duplicate else ""
        print(f"{job_id} {record.status.value}{when}{note}")
    return 0


async def cmd_jobs(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        records = await client.list_jobs(status=args.status, type=args.type, pipeline_id=args.pipeline,
                                         limit=args.limit)
    finally:
        await client.close()
    if args.json:
        _print_json([r.to_json() for r in records])
    else:
        _print_table(records)
    return 0


async def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        detail = await client.job_detail(args.id)
    finally:
        await client.close()
    if args.json:
        _print_json({**detail.job.to_json(), "history": [a.to_json() for a in detail.attempts],
                     "dependants": detail.dependants, "waiting_reason": detail.waiting_reason})
    else:
        _print_job(detail.job, detail.attempts, detail.dependants, detail.waiting_reason)
    return 0


def check_bulk_args(parser: ArgumentParser, args: argparse.Namespace) -> None:
    """`retry`/`cancel` take ids, or --all with filter options; never both (exit 2)."""
    if args.command not in BULK_ACTIONS:
        return
    options = [flag for flag, value in (("--status", args.status), ("--type", args.type),
                                        ("--pipeline", args.pipeline), ("--dry-run", args.dry_run)) if value]
    if args.all and args.ids:
        parser.error(f"{args.command}: give job ids or --all with a filter, not both")
    if args.all and getattr(args, "downstream", False):
        parser.error("retry: --downstream works on job ids, not with --all")
    if not args.all and not args.ids:
        parser.error(f"{args.command}: give job ids, or --all with a filter")
    if not args.all and options:
        parser.error(f"{args.command}: {options[0]} needs --all")


async def cmd_bulk(args: argparse.Namespace, settings: Settings) -> int:
    filt = JobFilter(statuses=frozenset(args.status), type=args.type, pipeline_id=args.pipeline)
    client = await _client(settings)
    try:
        result = await client.bulk(args.command, filt, dry_run=args.dry_run)
    finally:
        await client.close()
    count = f"{result.count:,}{'+' if result.capped else ''}"
    if args.json:
        _print_json({"action": args.command, "filter": filt.describe(), "dry_run": result.dry_run,
                     "count": result.count, "capped": result.capped, "changed": result.changed,
                     "chunks": result.chunks})
    elif result.dry_run:
        print(f"would {args.command} {count} job(s) matching {filt.describe()}")
    else:
        done = {"retry": "queued again", "cancel": "cancelled"}[args.command]
        extra = result.changed - result.count
        more = f" (and {extra:,} dependant job(s))" if extra > 0 else ""
        print(f"{done}: {count} job(s) matching {filt.describe()}{more}, in {result.chunks} transaction(s)")
    return 0


async def cmd_action(args: argparse.Namespace, settings: Settings) -> int:
    if getattr(args, "all", False):
        return await cmd_bulk(args, settings)
    client = await _client(settings)
    try:
        if args.command == "reject":
            changed = await client.reject(args.ids, args.reason)
        elif args.command == "retry" and args.downstream:
            changed = await client.retry_downstream(args.ids)
        else:
            changed = await getattr(client, args.command)(args.ids)
    finally:
        await client.close()
    past = {"cancel": "cancelled", "retry": "queued again", "approve": "approved", "reject": "rejected"}
    if args.json:
        _print_json({"action": args.command, "jobs": changed})
    else:
        extra = len(changed) - len(set(args.ids))
        more = f" (and {extra} dependant job(s))" if extra > 0 else ""
        print(f"{past[args.command]}: {', '.join(args.ids)}{more}")
    return 0


async def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from worker.processors.demo_video import demo_pipeline

    if args.count < 1:
        raise InvalidJob("--count must be at least 1")
    client = await _client(settings)
    try:
        options = {"duration_scale": 0.1} if args.fast else {}
        jobs = [demo_pipeline(args.topic, **options) for _ in range(args.count)]
        await client.enqueue_many(jobs)
    finally:
        await client.close()
    ids = [j.pipeline_id for j in jobs]
    if args.json:
        _print_json({"pipelines": ids})
    else:
        for pid in ids:
            print(f"demo pipeline {pid} enqueued (stages: script -> voice + image -> video -> compositing)")
    return 0


async def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from worker.runtime.registry import declared_schedules, instantiate, load_processor_classes
    from worker.runtime.worker import Worker

    if args.concurrency is not None:
        if args.concurrency < 1:
            raise InvalidJob("--concurrency must be at least 1")
        settings.MAX_CONCURRENT_JOBS = args.concurrency
    if args.metrics_port is not None:
        if not 0 <= args.metrics_port <= 65535:
            raise InvalidJob("--metrics-port must be a port number, 0 to 65535")
        settings.JOB_METRICS_PORT = args.metrics_port
    modules = [*settings.JOB_PROCESSOR_MODULES, *args.processors]
    processors = instantiate(load_processor_classes(modules, settings.JOB_PROCESSOR_PATH))
    declared = declared_schedules(modules, settings.JOB_PROCESSOR_PATH)
    target = Database.resolve(settings)
    await prepare_schema(target.dsn, embedded=target.embedded)
    if declared:
        async with await JobClient.connect(target.dsn, settings=settings, source="worker", pool_size=2) as client:
            await client.declare_schedules(declared)
    revive = None
    if target.embedded:
        from worker.embedded.server import embedded_server

        revive = embedded_server().revive
    caps = {name: n for limit in args.limit for name, n in limit.items()}
    worker = Worker(settings, target.dsn, processors, revive=revive, type_caps=caps)
    worker.install_signal_handlers()
    await worker.run()
    return 0


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from worker.embedded.keeper import Keeper
    from worker.embedded.server import embedded_server

    if args.action == "status":
        return cmd_db_status(args)
    if args.action == "stop":
        return cmd_db_stop(args)
    if settings.DATABASE_URL:
        raise JobdeskError("DATABASE_URL is set, so the embedded database is not used; unset it to run `jobdesk db`")
    server = embedded_server()
    keeper = Keeper(server, idle_stop_s=None)  # in the foreground: until Ctrl-C or SIGTERM
    started = keeper.start_in_foreground()
    dsn = server.dsn
    if not started:
        server.ensure_running()  # a client now, so that it does not stop while we migrate

    asyncio.run(prepare_schema(dsn, embedded=True))
    if args.json:
        _print_json({"DATABASE_URL": dsn, "started": started})
    else:
        print(f"DATABASE_URL={dsn}")
    sys.stdout.flush()
    if not started:
        print("jobdesk: the embedded database is already running (started by another jobdesk process)",
              file=sys.stderr)
        return 0
    print(f"embedded PostgreSQL running in {server.root}; press Ctrl-C to stop", file=sys.stderr)
    return asyncio.run(keeper.run())


def _clients_line(clients: Sequence[Any]) -> str:
    return ", ".join(f"{c.application_name or 'a connection'} (backend pid {c.pid})" for c in clients)


def cmd_db_status(args: argparse.Namespace) -> int:
    from worker.embedded.server import embedded_server

    status = embedded_server().status()
    if args.json:
        _print_json(status.to_json())
        return 0
    if not status.running:
        print(f"not running (embedded PostgreSQL in {status.root})")
        return 0
    keeper = f"keeper pid {status.keeper_pid}" if status.keeper_pid else "no keeper"
    print(f"running (embedded PostgreSQL in {status.root}, {keeper})")
    print(f"DATABASE_URL={status.dsn}")
    if status.clients is None:
        print("clients: unknown (it does not answer now)")
    else:
        print(f"clients: {len(status.clients)}" + (f": {_clients_line(status.clients)}" if status.clients else ""))
    if status.processes:
        print(f"used by jobdesk processes: {', '.join(map(str, status.processes))}")
    if status.keeper_pid is None:
        print("idle: unknown (not started by a keeper, so it does not stop by itself; `jobdesk db stop` stops it)")
    else:
        stops = ("runs until `jobdesk db` in the foreground ends" if status.idle_stop_s is None
                 else f"stops after {span(status.idle_stop_s)} without a client")
        print(f"idle: {span(status.idle_s or 0)} ({stops})")
    return 0


def cmd_db_stop(args: argparse.Namespace) -> int:
    from worker.embedded.server import embedded_server

    server = embedded_server()
    status = server.status()
    if not status.running:
        if args.json:
            _print_json({"stopped": False, "data_dir": str(status.root)})
        else:
            print("the embedded database is not running", file=sys.stderr)
        return 0
    if (status.clients or status.processes) and not args.force:
        users = [f"{len(status.clients)} connection(s): {_clients_line(status.clients)}"] if status.clients else []
        users += [f"jobdesk process(es) {', '.join(map(str, status.processes))}"] if status.processes else []
        raise JobdeskError(f"the embedded database is in use ({'; '.join(users)}); "
                           f"stop them first, or use `jobdesk db stop --force`")
    server.stop()
    if args.json:
        _print_json({"stopped": True, "data_dir": str(status.root)})
    else:
        print(f"stopped the embedded PostgreSQL in {status.root}")
    return 0


async def cmd_workers(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        workers = await client.workers()
    finally:
        await client.close()
    if args.json:
        _print_json([w.to_json() for w in workers])
        return 0
    if not workers:
        print("no workers")
        return 0
    rows = [("ID", "HOST", "PID", "STATE", "SLOTS", "RUNNING", "HEARTBEAT", "TYPES")]
    for w in workers:
        # A live worker past its lease is lost, though no other worker has declared it yet.
        unconfirmed = w.state != "lost" and w.is_lost(settings.JOB_LEASE_TIMEOUT)
        rows.append((w.id, w.host[:20], str(w.pid), "lost?" if unconfirmed else w.state, str(w.concurrency),
                     str(len(w.running_jobs)), f"{w.heartbeat_age_s:.0f}s ago", ",".join(w.job_types)[:40]))
    _print_rows(rows)
    return 0


async def cmd_worker_ctl(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        record = await client.worker_command(args.id, args.action)
    finally:
        await client.close()
    if args.json:
        _print_json({"worker": record.id, "requested": args.action})
    else:
        print(f"asked worker {record.id} on {record.host} to {args.action}")
    return 0


async def cmd_pipelines(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit < 1:
        raise InvalidJob("--limit must be at least 1")
    filt = PipelineFilter(statuses=frozenset(PipelineStatus(s) for s in args.status), search=args.search)
    client = await _client(settings)
    try:
        rows, more = await client.pipelines(filt, limit=args.limit)
    finally:
        await client.close()
    if args.json:
        _print_json([{**r.__dict__, "finished": r.finished} for r in rows])
        return 0
    if not rows:
        print("no pipelines")
        return 0
    now = datetime.now(UTC)
    table = [("ID", "NAME", "STATUS", "PROGRESS", "STARTED", "DURATION")]
    table += [(short_id(r.pipeline_id), r.name[:40], r.status.value, f"{r.completed}/{r.total}",
               _ago(r.started_at), span(r.duration_s(now))) for r in rows]
    _print_rows(table)
    if more:
        print(f"(first {args.limit}; use --limit or --status to see others)")
    return 0


async def cmd_cancel_pipeline(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        changed = await client.cancel_pipeline(args.id)
    finally:
        await client.close()
    if args.json:
        _print_json({"action": "cancel-pipeline", "pipeline": args.id, "jobs": changed})
    else:
        print(f"cancelled {len(changed)} job(s) of pipeline {args.id}")
    return 0


async def cmd_schedule(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        if args.verb == "add":
            record = await client.add_schedule(Schedule(
                name=args.name, type=args.type, input_data=args.input, cron=args.cron, every_s=args.every,
                timezone=args.timezone, misfire=args.misfire, overlap=args.overlap, priority=args.priority))
            records = [record]
        elif args.verb == "list":
            records = await client.schedules()
        elif args.verb == "jobs":
            ticks = await client.schedule_jobs(args.name)
            if args.json:
                _print_json([{"tick_at": t.tick_at.isoformat(), "job_id": t.job_id, "status": t.status}
                             for t in ticks])
            elif not ticks:
                print(f"schedule {args.name} has created no job yet")
            else:
                _print_rows([("TICK", "JOB", "STATUS")] + [
                    (f"{t.tick_at:%Y-%m-%d %H:%M:%S}Z", t.job_id or "(skipped: previous job unfinished)",
                     t.status or "-") for t in ticks])
            return 0
        elif args.verb == "remove":
            await client.remove_schedule(args.name)
            if args.json:
                _print_json({"removed": args.name})
            else:
                print(f"removed schedule {args.name}")
            return 0
        else:
            records = [await (client.pause_schedule if args.verb == "pause" else client.resume_schedule)(args.name)]
    finally:
        await client.close()
    if args.json:
        _print_json([r.to_json() for r in records] if args.verb == "list" else records[0].to_json())
        return 0
    if args.verb in ("add", "pause", "resume"):
        r = records[0]
        when = "paused" if r.paused else f"next run {r.next_tick_at:%Y-%m-%d %H:%M:%S}Z ({relative(r.next_tick_at)})"
        print(f"schedule {r.schedule.name} ({r.schedule.expression}, {r.schedule.timezone}): {when}")
        return 0
    if not records:
        print("no schedules")
        return 0
    rows = [("NAME", "WHEN", "TIMEZONE", "TYPE", "NEXT RUN", "LAST RUN", "STATE")]
    for r in records:
        rows.append((r.schedule.name, r.schedule.expression, r.schedule.timezone, r.schedule.type,
                     "-" if r.paused else f"{r.next_tick_at:%Y-%m-%d %H:%M:%S}Z",
                     f"{r.last_tick_at:%Y-%m-%d %H:%M:%S}Z" if r.last_tick_at else "-",
                     "paused" if r.paused else "active"))
    _print_rows(rows)
    return 0


async def cmd_token(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        if args.token_command == "create":
            token = await client.create_token(args.name, user_id=args.user, scopes=args.scope or None)
            if args.json:
                print(json.dumps({"token": token, "name": args.name}))
            else:
                print(token)
        elif args.token_command == "list":
            records = await client.list_tokens()
            if args.json:
                _print_json([r.to_json() for r in records])
            elif not records:
                print("no tokens")
            else:
                _print_rows([("NAME", "USER", "SCOPES", "CREATED")] + [
                    (r.name, "-" if r.user_id is None else str(r.user_id), ",".join(sorted(r.scopes)),
                     _ago(r.created_at)) for r in records])
        else:
            await client.revoke_token(args.name)
            if args.json:
                _print_json({"revoked": args.name})
            else:
                print(f"revoked token {args.name}")
    finally:
        await client.close()
    return 0


def cmd_api(args: argparse.Namespace, settings: Settings) -> int:
    from worker.api.server import run
    from worker.core.input_validation import make_validator
    from worker.runtime.registry import load_processor_classes

    # The processors a worker would load: their input models check inputs at enqueue (422).
    modules = [*settings.JOB_PROCESSOR_MODULES, *args.processors]
    validator = make_validator(load_processor_classes(modules, settings.JOB_PROCESSOR_PATH))
    host = args.host or settings.JOBDESK_API_HOST
    port = settings.JOBDESK_API_PORT if args.port is None else args.port
    workers = settings.JOBDESK_API_WORKERS if args.workers is None else args.workers
    return run(settings, host, port, auth=not args.no_auth, validate_input=validator, workers=workers)


async def cmd_prune(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        result = await client.prune(dry_run=args.dry_run, older_than=args.older_than, statuses=args.status)
    finally:
        await client.close()
    if args.json:
        _print_json({"dry_run": result.dry_run, "counts": result.counts})
    else:
        verb = "would delete" if result.dry_run else "deleted"
        _print_rows([(what, f"{n:,}") for what, n in result.counts.items()])
        print(f"{verb} {sum(result.counts.values()):,} row(s) in {result.seconds:.1f} s")
    return 0


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f}ms" if value < 1 else span(value)


async def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    try:
        metrics = await client.metrics(args.since)
        size = await client.table_size()
    finally:
        await client.close()
    if args.json:
        _print_json({**metrics.to_json(), "table": size.__dict__})
        return 0
    minutes = metrics.window.span.total_seconds() / 60
    print(f"last {metrics.window.label}: {metrics.completed:,} completed ({metrics.completed / minutes:.1f}/min), "
          f"{metrics.failed:,} failed ({metrics.failed / minutes:.1f}/min)")
    print("queue now: " + ", ".join(f"{n:,} {s}" for s, n in metrics.depth.now.items()))
    rows = f"~{size.estimated_rows:,}" if size.estimated_rows is not None else "unknown"
    print(f"table jobs: {rows} rows, {size.total_bytes / 2**20:,.1f} MiB on disk")
    if metrics.latency:
        table = [("TYPE", "ATTEMPTS", "WAIT P50", "WAIT P95", "RUN P50", "RUN P95")]
        table += [(lat.type, f"{lat.attempts:,}", _seconds(lat.wait_p50), _seconds(lat.wait_p95),
                   _seconds(lat.run_p50), _seconds(lat.run_p95)) for lat in metrics.latency]
        _print_rows(table)
    else:
        print("no attempts ended in this window")
    return 0


ASYNC_COMMANDS: dict[str, Callable[[argparse.Namespace, Settings], Coroutine[Any, Any, int]]] = {
    "migrate": cmd_migrate, "submit": cmd_submit, "jobs": cmd_jobs, "show": cmd_show,
    "cancel": cmd_action, "retry": cmd_action, "approve": cmd_action, "reject": cmd_action,
    "demo": cmd_demo, "worker": cmd_worker, "workers": cmd_workers, "worker-ctl": cmd_worker_ctl,
    "pipelines": cmd_pipelines, "cancel-pipeline": cmd_cancel_pipeline, "schedule": cmd_schedule, "token": cmd_token,
    "prune": cmd_prune, "stats": cmd_stats,
}


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    # While the database is away, asyncpg's pool logs a traceback every second as it retries; the
    # worker already says once that the database is unreachable, and again when it is back.
    logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_bulk_args(parser, args)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "db" and (args.keeper_args or args.action not in (None, "status", "stop")):
        if args.action != "keeper":
            parser.error(f"unknown db action {' '.join([args.action, *args.keeper_args])!r}; use status or stop")
        from worker.embedded.keeper import main as keeper_main

        return keeper_main(args.keeper_args)
    debug = bool(os.environ.get("JOBDESK_DEBUG"))
    try:
        settings = load_settings()
        setup_logging(settings.LOG_LEVEL if args.command == "worker" else "WARNING")
        if args.command == "db":
            return cmd_db(args, settings)
        if args.command == "api":
            setup_logging("WARNING")
            return cmd_api(args, settings)
        return asyncio.run(ASYNC_COMMANDS[args.command](args, settings))
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
