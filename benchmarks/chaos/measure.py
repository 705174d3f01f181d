"""What a case measured, from the jobs table and the processors' run files once the case has
drained: jobs lost, jobs run twice (at-least-once, and beyond it), the time until throughput is
back to 90 %, the backlog, and the pickup latency by phase.

Definitions (also in docs/scale.md, "Chaos"):

* lost: a job whose enqueue was confirmed (enqueue_many returned its id) and that is not
  `completed` at the end, after the drain.
* run twice, at-least-once: a later run of a job whose earlier run was on a worker killed after
  that run started, or during which (between the earlier run's start and the later one's) the
  server restarted. Anything else that runs a job's processor twice is a duplicate beyond
  at-least-once.
* back to 90 %: from a fault event, the seconds until the completions over every following 3 s
  window are at least 90 % of the rate before the fault (the worst over the case's events).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import pct


@dataclass
class Run:
    job_id: str
    attempt: int
    pid: int
    t: float


@dataclass
class Job:
    status: str
    created: float
    started: float | None
    completed: float | None
    attempts: int


@dataclass
class Phase:
    name: str
    start: float
    end: float


@dataclass
class CaseResult:
    name: str
    title: str
    enqueued: int = 0
    unconfirmed: int = 0
    completed: int = 0
    lost: int = 0
    reruns: int = 0
    beyond: int = 0
    beyond_ids: list[str] = field(default_factory=list)
    recovery_s: float = 0.0
    during_pct: float = 0.0
    backlog_s: float | None = None
    pre_rate: float = 0.0
    phases: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def read_runs(runs_dir: Path) -> tuple[list[Run], set[str]]:
    """Every run start (S lines), and the ids of runs that ended (job id, attempt, pid)."""
    starts: list[Run] = []
    ended: set[str] = set()
    for path in runs_dir.glob("runs-*.log"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 5:
                continue  # a line cut by SIGKILL mid-write
            kind, job_id, attempt, pid, t = parts
            if kind == "S":
                starts.append(Run(job_id, int(attempt), int(pid), float(t)))
            else:
                ended.add(f"{job_id} {attempt} {pid}")
    return starts, ended


def count_reruns(starts: list[Run], killed: list[tuple[int, float]],
                 restarts: list[float]) -> tuple[int, list[str]]:
    """Later runs of the same job: (all of them, the ids of jobs with one beyond at-least-once)."""
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in starts:
        by_job[run.job_id].append(run)
    reruns = 0
    beyond: list[str] = []
    for job_id, runs in by_job.items():
        runs.sort(key=lambda r: r.t)
        for prev, later in zip(runs, runs[1:]):
            reruns += 1
            worker_died = any(pid == prev.pid and at >= prev.t for pid, at in killed)
            server_restarted = any(prev.t <= at <= later.t for at in restarts)
            if not (worker_died or server_restarted):
                beyond.append(job_id)
                break
    return reruns, beyond


def per_second(times: list[float], start: float, end: float) -> list[int]:
    counts = [0] * max(0, int(end - start))  # whole seconds only: a cut last second is no dip
    for t in times:
        k = int(t - start)
        if 0 <= k < len(counts):
            counts[k] += 1
    return counts


def recovery(completions: list[float], events: list[float], pre_rate: float, horizon: float) -> float:
    """Worst time over the events until every 3 s window has >= 90 % of pre_rate completions."""
    worst = 0.0
    for i, event in enumerate(events):
        end = min(events[i + 1] if i + 1 < len(events) else horizon, horizon)
        counts = per_second(completions, event, end)
        dips = [k for k in range(max(0, len(counts) - 2)) if sum(counts[k:k + 3]) < 0.9 * 3 * pre_rate]
        if dips:
            worst = max(worst, dips[-1] + 1.0)
    return worst


def backlog_back(created: list[float], started: list[float], pre: Phase, after: float,
                 rate: float, until: float) -> float | None:
    """Seconds after `after` until the jobs waiting to start are back to at most the most seen
    before the fault plus a tenth of a second's offered jobs; None if they never are.
    `created` and `started` are sorted; a job's first start is never before its creation."""
    def waiting(t: float) -> int:
        return bisect.bisect_right(created, t) - bisect.bisect_right(started, t)

    steps = [pre.start + k * 0.5 for k in range(int((pre.end - pre.start) / 0.5))]
    limit = max((waiting(t) for t in steps), default=0) + 0.1 * rate
    t = after
    while t <= until:
        if waiting(t) <= limit:
            return round(t - after, 1)
        t += 0.5
    return None


def phase_figures(jobs: list[Job], phase: Phase, offered: float) -> dict[str, object]:
    done = [j.completed for j in jobs if j.completed is not None and phase.start <= j.completed < phase.end]
    pickups = [(j.started - j.created) * 1000 for j in jobs
               if j.started is not None and j.attempts == 1 and phase.start <= j.created < phase.end]
    span = max(phase.end - phase.start, 1e-9)
    return {"phase": phase.name, "offered": round(offered), "completed_per_s": round(len(done) / span),
            "pickup_p50_ms": round(pct(pickups, 50), 1) if pickups else None,
            "pickup_p99_ms": round(pct(pickups, 99), 1) if pickups else None}


def markdown_table(results: list[CaseResult]) -> str:
    head = ("| case | enqueued | not confirmed | completed | lost | run twice (at-least-once) | run twice beyond | "
            "back to 90 % | throughput during | backlog drained |")
    lines = [head, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        backlog = "never" if r.backlog_s is None else f"{r.backlog_s:.0f} s"
        lines.append(f"| {r.title} | {r.enqueued:,} | {r.unconfirmed:,} | {r.completed:,} | {r.lost} | {r.reruns} | "
                     f"{r.beyond} | {r.recovery_s:.0f} s | {r.during_pct:.0f} % | {backlog} |")
    return "\n".join(lines)


def pressure_tables(result: CaseResult) -> str:
    lines = ["| phase | offered jobs/s | completed jobs/s | pickup p50 | pickup p99 |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for p in result.phases:
        lines.append(f"| {p['phase']} | {p['offered']} | {p['completed_per_s']} | {p['pickup_p50_ms']} ms | "
                     f"{p['pickup_p99_ms']} ms |")
    if result.samples:
        names = [k for k in result.samples[0] if k not in ("when", "n_dead_tup", "n_live_tup", "heap")]
        lines += ["", "| when | n_dead_tup | n_live_tup | jobs heap | " + " | ".join(names) + " |",
                  "| --- | ---: | ---: | ---: |" + " ---: |" * len(names)]
        for s in result.samples:
            sizes = " | ".join(_mb(s[n]) for n in names)
            lines.append(f"| {s['when']} | {s['n_dead_tup']:,} | {s['n_live_tup']:,} | {_mb(s['heap'])} | {sizes} |")
    return "\n".join(lines)


def _mb(value: object) -> str:
    if not isinstance(value, (int, float)):
        return str(value)
    return f"{value / 2**20:,.1f} MB" if value >= 2**20 else f"{value / 2**10:,.0f} kB"
