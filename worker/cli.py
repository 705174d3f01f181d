"""`jobdesk`: the command line. Bad input gets one line on stderr and a non-zero exit code."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

import asyncpg

from worker import __version__
from worker.client import JobClient
from worker.db import resolve_target
from worker.errors import InvalidJob, JobdeskError
from worker.models import JobRecord, Status, short_id
from worker.pipeline_queries import PipelineFilter, PipelineStatus
from worker.service import Attempt, migrate_database, prepare_schema
from worker.settings import Settings, load_settings
from worker.stats_queries import BadWindow, Window, parse_window
from worker.timefmt import relative, span
from worker.transitions import WORKER_COMMANDS_LEGAL_FROM

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
    sub.add_parser("db", parents=[common], help="run the embedded PostgreSQL in the foreground")

    p = sub.add_parser("worker", parents=[common], help="run a worker")
    p.add_argument("--processors", action="append", default=[], metavar="MODULE",
                   help="module with a PROCESSOR_MAP (repeatable)")
    p.add_argument("--concurrency", type=int, metavar="N", help="override MAX_CONCURRENT_JOBS")

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
        p.add_argument("ids", nargs="+", metavar="ID")
        if name == "retry":
            p.add_argument("--downstream", action="store_true",
                           help="also retry every failed or cancelled job downstream of them")
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
    p = sub.add_parser("stats", parents=[common], help="throughput, queue depth and wait/run times")
    p.add_argument("--since", type=_window_arg, default=parse_window("1h"), metavar="SPAN",
                   help="the window: 15m, 1h (default), 24h, 7d… up to 30d")
    p = sub.add_parser("worker-ctl", parents=[common], help="pause, resume, drain or stop a worker")
    p.add_argument("id", metavar="ID")
    p.add_argument("action", metavar="ACTION", choices=list(WORKER_COMMANDS_LEGAL_FROM),
                   help=", ".join(WORKER_COMMANDS_LEGAL_FROM))
    return parser


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
        rows.append((short_id(r.id), r.type[:24], r.status.value, str(r.retry_count), _ago(r.created_at), error))
    _print_rows(rows)


def _print_job(record: JobRecord, attempts: list[Attempt], dependants: list[str]) -> None:
    fields = [("id", record.id), ("type", record.type), ("status", record.status.value),
              ("user", record.user_id), ("pipeline", record.pipeline_id or "-"),
              ("retries", record.retry_count), ("attempts", record.attempts),
              ("active", "yes" if record.is_active else "no"),
              ("created", f"{record.created_at:%Y-%m-%d %H:%M:%S} ({_ago(record.created_at)})"),
              ("updated", f"{record.updated_at:%Y-%m-%d %H:%M:%S} ({_ago(record.updated_at)})")]
    if record.completed_at:
        fields.append(("completed", f"{record.completed_at:%Y-%m-%d %H:%M:%S} ({_ago(record.completed_at)})"))
    if record.next_retry_at and record.status == Status.QUEUED:
        fields.append(("next retry", _ago(record.next_retry_at)))
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
    target = resolve_target(settings)
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
    client = await _client(settings)
    try:
        job_id = await client.enqueue(args.type, args.input, depends_on=args.depends_on,
                                      user_id=args.user, pipeline_id=args.pipeline, priority=args.priority)
        record = await client.get_job(job_id)
    finally:
        await client.close()
    if args.json:
        _print_json(record.to_json())
    else:
        print(f"{job_id} {record.status.value}")
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
                     "dependants": detail.dependants})
    else:
        _print_job(detail.job, detail.attempts, detail.dependants)
    return 0


async def cmd_action(args: argparse.Namespace, settings: Settings) -> int:
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
    from worker.registry import instantiate, load_processor_classes
    from worker.runner import Worker

    if args.concurrency is not None:
        if args.concurrency < 1:
            raise InvalidJob("--concurrency must be at least 1")
        settings.MAX_CONCURRENT_JOBS = args.concurrency
    modules = [*settings.JOB_PROCESSOR_MODULES, *args.processors]
    processors = instantiate(load_processor_classes(modules, settings.JOB_PROCESSOR_PATH))
    target = resolve_target(settings)
    await prepare_schema(target.dsn, embedded=target.embedded)
    revive = None
    if target.embedded:
        from worker.embedded import embedded_server

        revive = embedded_server().revive
    worker = Worker(settings, target.dsn, processors, revive=revive)
    worker.install_signal_handlers()
    await worker.run()
    return 0


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from worker.embedded import embedded_server

    if settings.DATABASE_URL:
        raise JobdeskError("DATABASE_URL is set, so the embedded database is not used; unset it to run `jobdesk db`")
    server = embedded_server()
    already = server.is_ready()
    dsn = server.ensure_running()

    asyncio.run(prepare_schema(dsn, embedded=True))
    if args.json:
        _print_json({"DATABASE_URL": dsn, "started": not already})
    else:
        print(f"DATABASE_URL={dsn}")
    sys.stdout.flush()
    if already:
        print("jobdesk: the embedded database is already running (started by another jobdesk process)",
              file=sys.stderr)
        return 0
    print(f"embedded PostgreSQL running in {server.root}; press Ctrl-C to stop", file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: server.request_stop())
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    server.stop()
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
    print("queue: " + ", ".join(f"{metrics.depth.now.get(s, 0):,} {s}" for s in
                                ("queued", "in_progress", "waiting_approval", "failed", "completed", "cancelled")))
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
    "pipelines": cmd_pipelines, "cancel-pipeline": cmd_cancel_pipeline, "stats": cmd_stats,
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
    if args.command is None:
        parser.print_help()
        return 0
    debug = bool(os.environ.get("JOBDESK_DEBUG"))
    try:
        settings = load_settings()
        setup_logging(settings.LOG_LEVEL if args.command == "worker" else "WARNING")
        if args.command == "db":
            return cmd_db(args, settings)
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
