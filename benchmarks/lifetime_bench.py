"""Lifetime benchmark: what a job costs PostgreSQL over its whole life (enqueue, claim, completion,
retention and vacuum) under a steady load, for two schemas side by side in one run.

    python benchmarks/lifetime_bench.py [--minutes 10] [--rate 2000] [--workers 2] [--concurrency 10]
        [--before e47fe8f] [--after PATH] [--only before|after] [--idle-reads-jobs] [--empty-input]
    python benchmarks/lifetime_bench.py --prune-jobs 10000000 [--before REF] [--after PATH] [--only ...]
    make bench-lifetime ARGS="--minutes 2"                    # a quick look (about 6 minutes)

The sides: "before" is a checkout of this repository at --before (a detached git worktree in the
temp folder, made once and reused), "after" is --after (default: this checkout). Each side's
commands (`jobdesk migrate`, `worker`, `prune`) run from its own checkout with this interpreter.
The sides run one after the other, with the same settings, each on a fresh embedded PostgreSQL
(durable commits, autovacuum at its defaults) migrated by its own `jobdesk migrate`.

The load, for --minutes: --rate no-op jobs a second enqueued by plain SQL (one multi-row
`INSERT INTO jobs (type, input_data)` every 50 ms, paced to the wall clock; each input is a small
object such as {"n": 17}, or {} with --empty-input); --workers `jobdesk worker` processes of the
side (MAX_CONCURRENT_JOBS=--concurrency, type `bench.noop` from benchmarks/bench_processors.py)
with JOB_RETENTION_COMPLETED=60s and JOB_PRUNE_INTERVAL=10; and from 2/10 to 7/10 of the run
(minutes 2-7 of 10), an idle REPEATABLE READ transaction that read `workers`, which holds vacuum
back in every table. It does not read `jobs`: that would also hold a lock on `jobs` and every
partition, which blocks partition maintenance too (--idle-reads-jobs measures that case).

The figures, each side (every reading covers `jobs` through pg_partition_tree('jobs'): a plain
table, or a partitioned one with all its partitions):
  CPU/job        user + system CPU of the whole server (the postmaster, its live children, and
                 the reaped ones through its cutime/cstime) from the first INSERT to the end,
                 less the monitor's own backend, divided by the jobs completed in that time;
  WAL/job        pg_current_wal_lsn() moved over the same time, divided by the same jobs;
  size           table + indexes + TOAST of every relation in the tree at the end, and at each
                 minute's end (does it stop growing once retention has caught up?);
  dead tuples    the peak of n_dead_tup summed over the tree, sampled every 5 s;
  throughput     jobs completed in each minute of the run (counted every second by their
                 completed row's updated_at, before retention deletes them), and the lowest and highest
                 minute as shares of the first;
  pickup         started_at - created_at of every completed job, p50 and p99;
  load           the machine's 1-minute load average at each minute's end: on a shared machine,
                 others' work moves every figure above (CPU per job included), so compare runs
                 whose sides saw a similar load.
Then the goals for "after" against "before": CPU/job <= 0.7x, WAL/job <= 0.6x, size at every
minute's end from minute 2 on within 10 % of minute 2's, and every minute's throughput within
10 % of the first minute's. A run takes a little over 2 x --minutes (23 minutes for 10).

--prune-jobs N instead compares `jobdesk prune` over N completed jobs past their retention
(benchmarks/lifetime_prune.py); goal for "after": under 1 s and under 1 MB of WAL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import pct  # noqa: E402
from benchmarks.lifetime_load import HOLD, Outcome, Plan, run_side  # noqa: E402
from benchmarks.lifetime_prune import prune_side  # noqa: E402
from benchmarks.lifetime_prune import report as prune_report  # noqa: E402
from benchmarks.lifetime_sides import Side, after_side, before_side, mb, side_server  # noqa: E402

CAUGHT_UP_MINUTE = 2  # retention (60 s) plus a prune interval (10 s) have passed by this minute's end


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=int, default=2000, help="jobs enqueued a second")
    parser.add_argument("--workers", type=int, default=2, help="worker processes per side")
    parser.add_argument("--concurrency", type=int, default=10, help="MAX_CONCURRENT_JOBS of each worker")
    parser.add_argument("--before", default="e47fe8f", metavar="REF", help="git ref of today's schema")
    parser.add_argument("--after", metavar="PATH", help="checkout of the new schema (default: this one)")
    parser.add_argument("--only", choices=("before", "after"))
    parser.add_argument("--idle-reads-jobs", action="store_true", help="the idle transaction reads jobs")
    parser.add_argument("--empty-input", action="store_true", help="enqueue jobs whose input is {}")
    parser.add_argument("--prune-jobs", type=int, metavar="N", help="compare pruning N old jobs instead")
    return parser.parse_args()


def sides_of(args: argparse.Namespace) -> list[Side]:
    sides = []
    if args.only in (None, "before"):
        sides.append(before_side(args.before))
    if args.only in (None, "after"):
        sides.append(after_side(args.after))
    return sides


async def lifetime(sides: list[Side], plan: Plan) -> list[Outcome]:
    logs = Path(tempfile.mkdtemp(prefix="jobdesk-lifetime-logs-"))
    outs = []
    try:
        for side in sides:
            print(f"  {side.name}: {side.label}", flush=True)
            async with side_server(side) as (dsn, postmaster):
                outs.append(await run_side(side, dsn, postmaster, plan, logs))
            o = outs[-1]
            print(f"  {side.name}: {o.jobs:,} completed of {o.enqueued:,} enqueued in {o.seconds:.0f} s", flush=True)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    return outs


def _ratio(values: list[float]) -> str:
    if len(values) < 2 or not values[0]:
        return ""
    return f"{values[-1] / values[0]:.2f}"


def shares(o: Outcome) -> tuple[float, float]:
    """The lowest and highest full minute's throughput as shares of the first minute's."""
    full = o.per_minute[:int(o.seconds // 60)] or o.per_minute
    first = full[0] or 1
    return min(full) / first, max(full) / first


def summary_rows(outs: list[Outcome]) -> list[tuple[str, list[float], Callable[[float], str]]]:
    per_job = [max(o.jobs, 1) for o in outs]
    return [
        ("PostgreSQL CPU per job", [o.cpu_s * 1e6 / n for o, n in zip(outs, per_job)], lambda v: f"{v:,.0f} us"),
        ("WAL per job", [o.wal / n for o, n in zip(outs, per_job)], lambda v: f"{v:,.0f} B"),
        ("jobs + indexes at the end", [float(o.size_end) for o in outs], mb),
        ("dead tuples at the peak", [float(o.dead_peak) for o in outs], lambda v: f"{v:,.0f}"),
        ("lowest minute / first", [shares(o)[0] for o in outs], lambda v: f"{v:.3f}"),
        ("highest minute / first", [shares(o)[1] for o in outs], lambda v: f"{v:.3f}"),
        ("pickup p50", [pct(o.pickups, 50) * 1000 if o.pickups else 0.0 for o in outs], lambda v: f"{v:,.1f} ms"),
        ("pickup p99", [pct(o.pickups, 99) * 1000 if o.pickups else 0.0 for o in outs], lambda v: f"{v:,.1f} ms"),
        ("jobs completed", [float(o.jobs) for o in outs], lambda v: f"{v:,.0f}"),
        ("database size at the end", [float(o.database) for o in outs], mb),
        ("relations in jobs' tree", [float(o.leaves) for o in outs], lambda v: f"{v:,.0f}"),
        ("machine load average (mean)", [statistics.fmean(o.loads) if o.loads else 0.0 for o in outs],
         lambda v: f"{v:.2f}"),
    ]


def report(sides: list[Side], outs: list[Outcome], plan: Plan) -> None:
    print(f"\nLIFETIME {plan.rate:,} jobs/s for {plan.minutes:g} min, completed jobs kept 60 s, pruned every "
          f"10 s, {plan.workers} worker(s) x {plan.concurrency}, vacuum held from {HOLD[0] * plan.minutes:g} to "
          f"{HOLD[1] * plan.minutes:g} min by a transaction that read {'jobs' if plan.idle_reads_jobs else 'workers'}"
          f", {os.cpu_count()} cores")
    for side in sides:
        print(f"  {side.name}: {side.label}")
    head = "".join(f"{s.name:>16}" for s in sides) + ("    after/before" if len(sides) == 2 else "")
    print(f"{'':28}{head}")
    for label, values, fmt in summary_rows(outs):
        print(f"{label:28}" + "".join(f"{fmt(v):>16}" for v in values) + f"{_ratio(values):>16}")
    print(f"\n{'minute':>6}" + "".join(f"{s.name + ' completed':>20}{s.name + ' size':>16}{'load':>6}" for s in sides))
    for m in range(max(len(o.per_minute) for o in outs)):
        cells = ""
        for o in outs:
            done = f"{o.per_minute[m]:,}" if m < len(o.per_minute) else ""
            size = mb(o.sizes[m]) if m < len(o.sizes) else ""
            load = f"{o.loads[m]:.1f}" if m < len(o.loads) else ""
            cells += f"{done:>20}{size:>16}{load:>6}"
        print(f"{m + 1:>6}{cells}")
    goals(sides, outs)


def goals(sides: list[Side], outs: list[Outcome]) -> None:
    """Met or short, for the last side (after), against the first (before) where a ratio is asked."""
    rows = summary_rows(outs)
    last, name = outs[-1], sides[-1].name
    if len(outs) == 2:
        for label, limit in (("PostgreSQL CPU per job", 0.7), ("WAL per job", 0.6)):
            values = next(v for lbl, v, _ in rows if lbl == label)
            ratio = values[1] / values[0] if values[0] else float("inf")
            verdict = "met" if ratio <= limit else "short"
            print(f"GOAL {name}: {label} at most {limit}x before's: {ratio:.2f}x, {verdict}")
    caught = last.sizes[CAUGHT_UP_MINUTE - 1:]
    if len(caught) >= 2:
        growth = max(caught) / caught[0]
        print(f"GOAL {name}: size stops growing once retention caught up (every minute's end from minute "
              f"{CAUGHT_UP_MINUTE} within 1.10x of minute {CAUGHT_UP_MINUTE}'s): at most {growth:.2f}x, "
              f"{'met' if growth <= 1.10 else 'short'}")
    else:
        print(f"GOAL {name}: size stops growing: n/a (the run ends before minute {CAUGHT_UP_MINUTE + 1})")
    low, high = shares(last)
    ok = low >= 0.9 and high <= 1.1
    print(f"GOAL {name}: every minute's throughput within 10 % of the first's: {low:.3f}-{high:.3f}, "
          f"{'met' if ok else 'short'}")


async def main() -> None:
    args = parse()
    sides = sides_of(args)
    if args.prune_jobs:
        print(f"jobdesk prune benchmark: {args.prune_jobs:,} completed jobs past their retention, per side",
              flush=True)
        prune_report(sides, [await prune_side(side, args.prune_jobs) for side in sides])
        return
    plan = Plan(args.minutes, args.rate, args.workers, args.concurrency, args.idle_reads_jobs,
                "empty" if args.empty_input else "small")
    print(f"jobdesk lifetime benchmark: {args.rate:,} jobs/s for {args.minutes:g} min per side", flush=True)
    report(sides, await lifetime(sides, plan), plan)


if __name__ == "__main__":
    asyncio.run(main())
