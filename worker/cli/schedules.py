"""`jobdesk schedule add|list|pause|resume|remove|jobs|run`: periodic jobs."""

from __future__ import annotations

import argparse

from jobdesk.cli.arguments import ArgumentParser, Subparsers, json_arg
from jobdesk.cli.output import print_json, print_rows
from jobdesk.cli.session import Command, Invocation
from jobdesk.core.durations import parse_seconds
from jobdesk.core.schedules import MISFIRE_POLICIES, OVERLAP_POLICIES, Schedule
from jobdesk.core.timefmt import relative
from jobdesk.runtime.scheduler import ScheduledJob, ScheduleRecord


def _interval_arg(text: str) -> float:
    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parsers(sub: Subparsers, group_common: ArgumentParser) -> None:
    p = sub.add_parser("schedule", parents=[group_common],
                       help="periodic jobs: add, list, pause, resume, remove, run now")
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
    add.add_argument("--input", type=json_arg, default={}, metavar="JSON", help="input_data of each job")
    add.add_argument("--timezone", default="UTC", metavar="TZ", help="the cron expression's timezone (default UTC)")
    add.add_argument("--misfire", choices=list(MISFIRE_POLICIES), default="skip",
                     help="after downtime: skip missed ticks (default), run once, or run all (at most 100)")
    add.add_argument("--overlap", choices=list(OVERLAP_POLICIES), default="allow",
                     help="skip: no new job while the previous one is unfinished")
    add.add_argument("--priority", type=int, default=0, help="higher runs first")
    verbs.add_parser("list", parents=[common], help="list schedules with their next and last run")
    for verb, what in (("pause", "pause a schedule"), ("resume", "resume a paused schedule"),
                       ("remove", "remove a schedule"), ("jobs", "the jobs a schedule created, newest first"),
                       ("run", "enqueue one run now; the next regular run does not move")):
        v = verbs.add_parser(verb, parents=[common], help=what)
        v.add_argument("name", metavar="NAME")


async def cmd_schedule(inv: Invocation) -> int:
    args = inv.args
    async with inv.service() as jobs:
        if args.verb == "jobs":
            ticks = await jobs.schedule_jobs(args.name)
        elif args.verb == "run":
            job_id = await jobs.run_schedule(args.name)
        elif args.verb == "remove":
            await jobs.remove_schedule(args.name)
        elif args.verb == "list":
            records = await jobs.schedules()
        elif args.verb == "add":
            records = [await jobs.add_schedule(Schedule(
                name=args.name, type=args.type, input_data=args.input, cron=args.cron, every_s=args.every,
                timezone=args.timezone, misfire=args.misfire, overlap=args.overlap, priority=args.priority))]
        else:
            records = [await (jobs.pause_schedule if args.verb == "pause" else jobs.resume_schedule)(args.name)]
    if args.verb == "jobs":
        _print_ticks(args.name, ticks, as_json=args.json)
    elif args.verb == "run":
        if args.json:
            print_json({"schedule": args.name, "job_id": job_id})
        else:
            print(f"{job_id}: a run of schedule {args.name}, enqueued now")
    elif args.verb == "remove":
        if args.json:
            print_json({"removed": args.name})
        else:
            print(f"removed schedule {args.name}")
    elif args.json:
        print_json([r.to_json() for r in records] if args.verb == "list" else records[0].to_json())
    elif args.verb == "list":
        _print_schedules(records)
    else:
        r = records[0]
        when = "paused" if r.paused else f"next run {r.next_tick_at:%Y-%m-%d %H:%M:%S}Z ({relative(r.next_tick_at)})"
        print(f"schedule {r.schedule.name} ({r.schedule.expression}, {r.schedule.timezone}): {when}")
    return 0


def _print_ticks(name: str, ticks: list[ScheduledJob], *, as_json: bool) -> None:
    if as_json:
        print_json([{"tick_at": t.tick_at.isoformat(), "job_id": t.job_id, "status": t.status} for t in ticks])
    elif not ticks:
        print(f"schedule {name} has created no job yet")
    else:
        print_rows([("TICK", "JOB", "STATUS")] + [
            (f"{t.tick_at:%Y-%m-%d %H:%M:%S}Z", t.job_id or "(skipped: previous job unfinished)",
             t.status or "-") for t in ticks])


def _print_schedules(records: list[ScheduleRecord]) -> None:
    if not records:
        print("no schedules")
        return
    rows = [("NAME", "WHEN", "TIMEZONE", "TYPE", "NEXT RUN", "LAST RUN", "STATE")]
    for r in records:
        rows.append((r.schedule.name, r.schedule.expression, r.schedule.timezone, r.schedule.type,
                     "-" if r.paused else f"{r.next_tick_at:%Y-%m-%d %H:%M:%S}Z",
                     f"{r.last_tick_at:%Y-%m-%d %H:%M:%S}Z" if r.last_tick_at else "-",
                     "paused" if r.paused else "active"))
    print_rows(rows)


COMMANDS: dict[str, Command] = {"schedule": cmd_schedule}
