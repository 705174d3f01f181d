"""The database itself: `jobdesk migrate`, `jobdesk db` (the embedded PostgreSQL in the
foreground, `db status`, `db stop`), `jobdesk prune` and `jobdesk stats`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.cli.output import print_json, print_rows
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.durations import parse_duration
from jobdesk.core.errors import JobdeskError
from jobdesk.core.timefmt import span
from jobdesk.runtime.retention import PRUNABLE
from jobdesk.service.schema import migrate_database_ahead, prepare_schema
from jobdesk.store.stats import BadWindow, Window, parse_window
from jobdesk.store.table_size import COUNTED_ROWS_CAP

if TYPE_CHECKING:
    from datetime import datetime

    from jobdesk.embedded.server import Client
    from jobdesk.store.partition_migrate import Copied, CopyReport

# -- arguments ------------------------------------------------------------------------------


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


def add_setup_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """migrate, db."""
    sub.add_parser("migrate", parents=[common], help="apply the schema migrations")
    p = sub.add_parser("db", parents=[common],
                       help="the embedded PostgreSQL: run it in the foreground, or `db status`, `db stop`")
    p.add_argument("action", nargs="?", metavar="status|stop",
                   help="status: whether it runs, its DATABASE_URL, clients and idle time; stop: stop it now")
    p.add_argument("keeper_args", nargs="*", help=argparse.SUPPRESS)  # of the hidden `db keeper`
    p.add_argument("--force", action="store_true", help="with stop: stop it even while clients use it")


def add_upkeep_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    """prune, stats."""
    p = sub.add_parser("prune", parents=[common], help="delete finished jobs past their retention now")
    p.add_argument("--dry-run", action="store_true", help="count what would be deleted; change nothing")
    p.add_argument("--older-than", type=_duration_arg, metavar="DURATION",
                   help="instead of the JOB_RETENTION_* settings: 90s, 12h, 7d, ...")
    p.add_argument("--status", action="extend", nargs="+", default=[], metavar="S", choices=PRUNABLE,
                   help=f"only these ({', '.join(PRUNABLE)}; default all)")
    p = sub.add_parser("stats", parents=[common], help="throughput, queue depth and wait/run times")
    p.add_argument("--since", type=_window_arg, default=parse_window("1h"), metavar="SPAN",
                   help="the window: 15m, 1h (default), 24h, 7d… up to 30d")


def keeper_call(parser: ArgumentParser, args: argparse.Namespace) -> list[str] | None:
    """The arguments of the hidden `jobdesk db keeper` (the process that keeps the embedded
    server), None for any other command; any other unknown `db` action is a usage error."""
    if args.command != "db" or not (args.keeper_args or args.action not in (None, "status", "stop")):
        return None
    if args.action != "keeper":
        parser.error(f"unknown db action {' '.join([args.action, *args.keeper_args])!r}; use status or stop")
    return list(args.keeper_args)


# -- commands -------------------------------------------------------------------------------

async def cmd_migrate(inv: Invocation) -> int:
    database = inv.database
    out = sys.stderr if inv.args.json else sys.stdout
    applied, copy = await migrate_database_ahead(database.dsn, progress=lambda c: _print_copy_progress(c, out))
    names = [f"{m.version:03d}_{m.name}" for m in applied]
    if inv.args.json:
        print_json({"applied": names, "database": database.describe(),
                    **({"copied_ahead": copy.as_json()} if copy is not None else {})})
        return 0
    if copy is not None:
        _print_copy_report(copy)
    if names:
        print(f"applied {len(names)} migration(s) to {database.describe()}: {', '.join(names)}")
    else:
        print(f"{database.describe()} is up to date")
    return 0


def _print_copy_progress(copied: Copied, out: TextIO) -> None:
    if copied.batches % 20 and not copied.finished:
        return  # a line every 20 batches (100,000 rows), and at the end
    share = f" of about {copied.estimate:,}" if copied.estimate else ""
    print(f"copying jobs ahead: {copied.scanned:,}{share} rows looked at, {copied.copied:,} copied, "
          f"{copied.rate:,.0f} rows/s", file=out, flush=True)


def _print_copy_report(copy: CopyReport) -> None:
    resumed = f" (resumed after id {copy.resumed_from})" if copy.resumed_from else ""
    print(f"copied {copy.copied_ahead:,} jobs ahead into the partitioned table in {copy.copy_seconds:.1f} s"
          f"{resumed}, and vacuumed them in {copy.vacuum_seconds:.1f} s; the workers went on meanwhile")
    print(f"the swap held jobs for {copy.swap_seconds * 1000:.0f} ms until its commit ({copy.swap_tries} tr"
          f"{'y' if copy.swap_tries == 1 else 'ies'}); the commit took {copy.commit_seconds * 1000:.0f} ms")
    statuses = sorted(set(copy.counts_before) | set(copy.counts_after))
    print("jobs by status, before | after: " + ", ".join(
        f"{s} {copy.counts_before.get(s, 0):,} | {copy.counts_after.get(s, 0):,}" for s in statuses))


def cmd_db(inv: Invocation) -> int:
    from jobdesk.embedded.keeper import Keeper
    from jobdesk.embedded.server import embedded_server

    args = inv.args
    if args.action == "status":
        return cmd_db_status(args)
    if args.action == "stop":
        return cmd_db_stop(args)
    if inv.settings.DATABASE_URL:
        raise JobdeskError("DATABASE_URL is set, so the embedded database is not used; unset it to run `jobdesk db`")
    server = embedded_server()
    keeper = Keeper(server, idle_stop_s=None)  # in the foreground: until Ctrl-C or SIGTERM
    started = keeper.start_in_foreground()
    dsn = server.dsn
    if not started:
        server.ensure_running()  # a client now, so that it does not stop while we migrate

    asyncio.run(prepare_schema(dsn, embedded=True))
    if args.json:
        print_json({"DATABASE_URL": dsn, "started": started})
    else:
        print(f"DATABASE_URL={dsn}")
    sys.stdout.flush()
    if not started:
        print("jobdesk: the embedded database is already running (started by another jobdesk process)",
              file=sys.stderr)
        return 0
    print(f"embedded PostgreSQL running in {server.root}; press Ctrl-C to stop", file=sys.stderr)
    return asyncio.run(keeper.run())


def _clients_line(clients: Sequence[Client]) -> str:
    return ", ".join(f"{c.application_name or 'a connection'} (backend pid {c.pid})" for c in clients)


def cmd_db_status(args: argparse.Namespace) -> int:
    from jobdesk.embedded.server import embedded_server

    status = embedded_server().status()
    if args.json:
        print_json(status.to_json())
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
    from jobdesk.embedded.server import embedded_server

    server = embedded_server()
    status = server.status()
    if not status.running:
        if args.json:
            print_json({"stopped": False, "data_dir": str(status.root)})
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
        print_json({"stopped": True, "data_dir": str(status.root)})
    else:
        print(f"stopped the embedded PostgreSQL in {status.root}")
    return 0


async def cmd_prune(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        result = await jobs.prune(dry_run=args.dry_run, older_than=args.older_than, statuses=args.status)
    if args.json:
        print_json(result.as_json())
        return 0
    deleted = {what: n for what, n in result.counts.items() if not (what == "completed" and result.dropped)}
    print_rows([(what, f"{n:,}") for what, n in result.counts.items()])
    verb = "would delete" if result.dry_run else "deleted"
    print(f"{verb} {sum(deleted.values()):,} row(s) in {result.seconds:.1f} s")
    for d in result.dropped:  # completed jobs go a partition at a time, deleting no row
        kept = f"; {d.kept:,} still needed moved to a newer partition" if d.kept else ""
        print(f"{'would drop' if result.dry_run else 'dropped'} partition {d.name} "
              f"(completed {_range(d.lower, d.upper)}): about {d.jobs:,} jobs{kept}")
    return 0


def _range(lower: datetime | None, upper: datetime | None) -> str:
    """A partition's range of completion times, in UTC."""
    end = f"{upper:%Y-%m-%d %H:%M}" if upper else "now"
    return f"before {end}" if lower is None else f"from {lower:%Y-%m-%d %H:%M} to {end}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f}ms" if value < 1 else span(value)


async def cmd_stats(inv: Invocation) -> int:
    async with inv.service() as jobs:
        metrics = await jobs.metrics(inv.args.since)
        size = await jobs.table_size()
    if inv.args.json:
        print_json({**metrics.to_json(), "table": size.to_json()})
        return 0
    minutes = metrics.window.span.total_seconds() / 60
    print(f"last {metrics.window.label}: {metrics.completed:,} completed ({metrics.completed / minutes:.1f}/min), "
          f"{metrics.failed:,} failed ({metrics.failed / minutes:.1f}/min)")
    print("queue now: " + ", ".join(f"{n:,} {s}" for s, n in metrics.depth.now.items()))
    if size.estimated_rows is not None:
        rows = f"~{size.estimated_rows:,}"
    elif size.counted_rows is not None:  # not analysed yet: counted, up to a cap
        rows = f"{COUNTED_ROWS_CAP:,}+" if size.counted_past_cap else f"{size.counted_rows:,}"
    else:
        rows = "unknown"
    print(f"table jobs: {rows} rows, {size.total_bytes / 2**20:,.1f} MiB on disk, "
          f"{size.partitions} partitions of completed jobs")
    if size.last_prune is not None:
        print(f"last prune {size.last_prune.at:%Y-%m-%d %H:%M}: {size.last_prune.describe()}")
    if metrics.latency:
        table = [("TYPE", "ATTEMPTS", "WAIT P50", "WAIT P95", "RUN P50", "RUN P95")]
        table += [(lat.type, f"{lat.attempts:,}", _seconds(lat.wait_p50), _seconds(lat.wait_p95),
                   _seconds(lat.run_p50), _seconds(lat.run_p95)) for lat in metrics.latency]
        print_rows(table)
    else:
        print("no attempts ended in this window")
    return 0


COMMANDS: dict[str, Command] = {"migrate": cmd_migrate, "db": cmd_db, "prune": cmd_prune, "stats": cmd_stats}
