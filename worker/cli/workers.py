"""`jobdesk worker` (run one), `jobdesk workers` (list them) and `jobdesk worker-ctl` (pause,
resume, drain or stop one)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import cut, print_json, print_rows
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.errors import InvalidJob
from jobdesk.core.limits import parse_type_limit
from jobdesk.core.processor import BaseProcessor
from jobdesk.core.rules import WORKER_COMMANDS_LEGAL_FROM
from jobdesk.service.schema import prepare_schema

if TYPE_CHECKING:
    from jobdesk.store.db import Database


def _limit_arg(text: str) -> dict[str, int]:
    try:
        return parse_type_limit(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--limit {exc}") from None


def add_worker_parser(sub: Subparsers, common: ArgumentParser) -> None:
    p = sub.add_parser("worker", parents=[common], help="run a worker")
    p.add_argument("--processors", action="extend", nargs="+", default=[], metavar="MODULE",
                   help="modules with a PROCESSOR_MAP (one or more; repeatable)")
    p.add_argument("--django", metavar="SETTINGS",
                   help="run the Django tasks of this settings module (e.g. mysite.settings) whose backend is "
                        "jobdesk.integrations.django.JobdeskBackend, on the database its DATABASES names for them")
    p.add_argument("--concurrency", type=int, metavar="N", help="override MAX_CONCURRENT_JOBS")
    p.add_argument("--metrics-port", type=int, metavar="P",
                   help="serve Prometheus metrics on this port (overrides JOB_METRICS_PORT)")
    p.add_argument("--limit", type=_limit_arg, action="append", default=[], metavar="TYPE=N",
                   help="run at most N jobs of TYPE at once in this worker (repeatable)")


def add_fleet_parser(sub: Subparsers, common: ArgumentParser) -> None:
    sub.add_parser("workers", parents=[common], help="list workers and what they run")


def add_control_parser(sub: Subparsers, common: ArgumentParser) -> None:
    p = sub.add_parser("worker-ctl", parents=[common], help="pause, resume, drain or stop a worker")
    p.add_argument("id", metavar="ID")
    p.add_argument("action", metavar="ACTION", choices=list(WORKER_COMMANDS_LEGAL_FROM),
                   help=", ".join(WORKER_COMMANDS_LEGAL_FROM))


async def cmd_worker(inv: Invocation) -> int:
    """Run a worker until it is stopped. Before its first claim, one short connection checks the
    schema (migrating the embedded database) and upserts the schedules its processor modules
    declare, while the worker opens its own pool."""
    from jobdesk.runtime.registry import declared_schedules, instantiate, load_processor_classes
    from jobdesk.runtime.worker import Worker

    args, settings = inv.args, inv.settings
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
    if args.django:  # on the database its tasks are written to, not on DATABASE_URL's
        processors.update(_django_processors(args.django))
        database = await _django_database(args.django, inv)
    else:
        database = inv.database
    caps = {name: n for limit in args.limit for name, n in limit.items()}
    worker = Worker(settings, database.dsn, processors, revive=database.revive if database.embedded else None,
                    type_caps=caps)
    worker.install_signal_handlers()
    await worker.run(ready=prepare_schema(database.dsn, embedded=database.embedded, schedules=declared))
    return 0


def _django_processors(settings_module: str) -> dict[str, BaseProcessor]:
    """The Django project's tasks (see `jobdesk.integrations.django`); Django missing is said in one line."""
    try:
        from jobdesk.integrations.django import django_processors
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "django":
            raise
        raise InvalidJob("--django needs Django 6 (pip install 'jobdesk[django]', on Python 3.12 or later)") from None
    try:
        return django_processors(settings_module)
    except ImportError as exc:
        raise InvalidJob(f"--django {settings_module}: {exc}") from None


async def _django_database(settings_module: str, inv: Invocation) -> Database:
    """The database of the Django project's tasks, which the worker runs on (Django set up by now)."""
    from jobdesk.integrations.django import worker_database

    return await worker_database(settings_module, inv.settings)


async def cmd_workers(inv: Invocation) -> int:
    args, settings = inv.args, inv.settings
    async with inv.service() as jobs:
        workers = await jobs.workers()
    if args.json:
        print_json([w.to_json() for w in workers])
        return 0
    if not workers:
        print("no workers")
        return 0
    rows = [("ID", "HOST", "PID", "STATE", "SLOTS", "RUNNING", "HEARTBEAT", "TYPES")]
    for w in workers:
        # A live worker past its lease is lost, though no other worker has declared it yet.
        unconfirmed = w.state != "lost" and w.is_lost(settings.JOB_LEASE_TIMEOUT)
        rows.append((w.id, cut(w.host, 20), str(w.pid), "lost?" if unconfirmed else w.state, str(w.concurrency),
                     str(len(w.running_jobs)), f"{w.heartbeat_age_s:.0f}s ago", cut(",".join(w.job_types), 40)))
    print_rows(rows)
    return 0


async def cmd_worker_ctl(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        record = await jobs.worker_command(args.id, args.action)
    if args.json:
        print_json({"worker": record.id, "requested": args.action})
    else:
        print(f"asked worker {record.id} on {record.host} to {args.action}")
    return 0


COMMANDS: dict[str, Command] = {"worker": cmd_worker, "workers": cmd_workers, "worker-ctl": cmd_worker_ctl}
