"""The engine's figures in one table: runs the engine benchmarks with short settings and writes
the table of the performance page (docs/performance.md, between its bench-report markers) with
the date, the commit and the exact command of every figure.

    python benchmarks/report.py [--output docs/performance.md] [--tiny]

Each figure is read from what its benchmark prints, so the docs carry no figure typed by hand.
`--tiny` runs every benchmark at a toy size, all at once (a check that the report still reads
them; its figures mean nothing).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = "<!-- bench-report: start -->"
END = "<!-- bench-report: end -->"

Rows = list[tuple[str, str]]  # (what, figure)


@dataclass(frozen=True)
class Stage:
    """One benchmark run: its script and arguments (short, and tiny), and how to read its output."""

    script: str
    args: list[str]
    tiny: list[str]
    read: Callable[[str], Rows]

    def command(self, tiny: bool) -> list[str]:
        return [f"benchmarks/{self.script}", *(self.tiny if tiny else self.args)]


def _find(pattern: str, text: str, what: str) -> re.Match[str]:
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise ValueError(f"the output has no {what} (looked for /{pattern}/)")
    return match


def read_engine(out: str) -> Rows:
    jobs = _find(r"engine benchmark: ([\d,]+) no-op jobs", out, "job count").group(1)
    tp = _find(r"^THROUGHPUT median ([\d,]+) jobs/s \(steady ([\d,]+)\)", out, "THROUGHPUT line")
    cpu = re.findall(r"worker CPU ([\d.]+) ms/job", out)
    lat = _find(r"^LATENCY enqueue->start over (\d+) jobs: p50 ([\d.]+) ms, p95 ([\d.]+) ms, p99 ([\d.]+) ms",
                out, "LATENCY line")
    cpu_text = f"; worker CPU {sorted(float(c) for c in cpu)[len(cpu) // 2]:.3f} ms per job" if cpu else ""
    return [(f"{jobs} no-op jobs, one worker, `MAX_CONCURRENT_JOBS=10`",
             f"{tp.group(1)} jobs/s from launch to done ({tp.group(2)} steady){cpu_text}"),
            (f"enqueue → processor start, idle worker ({lat.group(1)} jobs)",
             f"p50 {lat.group(2)} ms, p95 {lat.group(3)} ms, p99 {lat.group(4)} ms")]


def read_enqueue(out: str) -> Rows:
    jobs = _find(r"enqueue benchmark: ([\d,]+) no-op jobs", out, "job count").group(1)

    def median(name: str) -> str:
        return _find(rf"^{re.escape(name)}\s+median\s+([\d,]+) jobs/s", out, f"{name} median").group(1)

    rows = []
    cases = (("", "independent jobs"), (", a dependency each", "jobs that each depend on one of 100 others"))
    for dependent, label in cases:
        rows.append((f"bulk enqueue of {jobs} {label}",
                     f"one `INSERT` per row {median('per-row SQL (executemany)' + dependent)} jobs/s; "
                     f"`JobClient.enqueue_many` {median('JobClient.enqueue_many' + dependent)} jobs/s; "
                     f"raw `COPY` {median('raw COPY' + dependent)} jobs/s"))
    rows.append((f"bulk enqueue of {jobs} jobs with a unique key each; as a pipeline of 100 roots and their "
                 "dependants",
                 f"`enqueue_many` {median('JobClient.enqueue_many, a unique_key each')} jobs/s; `create_pipeline` "
                 f"{median('JobClient.create_pipeline, 100 roots + fan-out')} jobs/s"))
    return rows


def read_trickle(out: str) -> Rows:
    found = re.findall(r"^\s*(\d+) jobs/s in batches of (\d+): ([\d,]+) jobs, [\d,]+ round trips, ([\d.]+) per job; "
                       r"pickup latency p50 ([\d.]+) ms, p99 ([\d.]+) ms", out, re.MULTILINE)
    if not found:
        raise ValueError("the output has no trickle line")
    return [(f"a producer at {rate} jobs/s in batches of {batch}, one worker",
             f"{per_job} claim and completion round trips per job; pickup p50 {p50} ms, p99 {p99} ms")
            for rate, batch, _, per_job, p50, p99 in found]


def read_backlog(out: str) -> Rows:
    size = _find(r"behind ([\d,]+)-job backlogs", out, "backlog size").group(1)
    shares = [(name.strip(), share) for name, share in
              re.findall(r"^(\S.{13})\s*[\d,]+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+$", out, re.MULTILINE)
              if name.strip() != "baseline"]
    if not shares:
        raise ValueError("the output has no backlog table")
    return [(f"a worker's throughput behind {size} jobs it cannot take, as a share of a clean run",
             "; ".join(f"{name} {share}" for name, share in shares))]


def read_prune(out: str) -> Rows:
    old = _find(r"prune benchmark: ([\d,]+) old completed jobs", out, "old job count").group(1)
    ratio = _find(r"^RATIO ([\d.]+) of the worker's throughput alone", out, "RATIO line").group(1)
    waits = _find(r"^LOCK WAITS on the pruner: (\d+) backend-samples in (\d+) samples", out, "LOCK WAITS line")
    return [(f"a worker running jobs while the pruner deletes {old} old ones",
             f"{ratio} of its throughput alone; {waits.group(1)} of {waits.group(2)} samples of the worker's "
             "connections waiting on a lock")]


def read_index_cost(out: str) -> Rows:
    jobs = _find(r"index cost: ([\d,]+) jobs per measure", out, "job count").group(1)
    base = _find(r"^every index\s+([\d.]+) us\s+([\d.]+) us\s+([\d.]+) us$", out, "every-index line")
    each = re.findall(r"^without (\w+)\s+([-+][\d.]+) us\s+([-+][\d.]+) us\s+([-+][\d.]+) us$", out, re.MULTILINE)
    if not each:
        raise ValueError("the output has no per-index line")
    return [(f"PostgreSQL's CPU per job with every index of `jobs` ({jobs} jobs)",
             f"per-row INSERT {base.group(1)} µs; set INSERT {base.group(2)} µs; claim + complete {base.group(3)} µs"),
            *((f"CPU saved per job without `{name}`: per-row INSERT / set INSERT / claim + complete",
               f"{a} / {b} / {c} µs") for name, a, b, c in each)]


def read_growth(out: str) -> Rows:
    size = _find(r"clean table against ([\d,]+) finished jobs", out, "history size").group(1)
    shares = [(label, _find(rf"^{key}\s+median clean .* share ([\d.]+)", out, f"{key} line").group(1))
              for key, label in (("THROUGHPUT", "throughput"), ("ENQUEUE per-row", "one `INSERT` per row"),
                                 ("ENQUEUE set", "one set `INSERT`"))]
    return [(f"with {size} finished jobs in `jobs` (retention off), as a share of a clean table",
             "; ".join(f"{label} {share}" for label, share in shares))]


STAGES = [
    Stage("engine_bench.py", ["--jobs", "20000", "--runs", "3", "--latency", "200", "--skip-history"],
          ["--jobs", "300", "--runs", "1", "--latency", "5", "--skip-history"], read_engine),
    Stage("enqueue_bench.py", ["--jobs", "20000", "--runs", "3"], ["--jobs", "200", "--runs", "1"], read_enqueue),
    Stage("trickle_bench.py", ["--seconds", "20"], ["--seconds", "1", "--rates", "100"], read_trickle),
    Stage("backlog_bench.py", ["--jobs", "10000", "--backlog", "100000", "--scheduled", "200000", "--runs", "3",
                               "--cases",
                               "unserved,retry in 1 h,20 types,scheduled,limit 10,limit other"],
          ["--jobs", "200", "--backlog", "500", "--scheduled", "500", "--cases", "unserved"], read_backlog),
    Stage("index_cost_bench.py", ["--jobs", "10000", "--runs", "1"], ["--jobs", "300", "--runs", "1"],
          read_index_cost),
    Stage("prune_bench.py", ["--old", "1000000", "--jobs", "20000"], ["--old", "2000", "--jobs", "300"], read_prune),
    Stage("growth_bench.py", ["--history", "10000000", "--jobs", "20000", "--runs", "2"],
          ["--history", "2000", "--jobs", "200", "--runs", "1"], read_growth),
]


def run_stage(stage: Stage, tiny: bool) -> tuple[str, Rows]:
    """Run one benchmark; its command as a reader would type it, and its figures."""
    argv = stage.command(tiny)
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    sys.stdout.write(f"$ python {shlex.join(argv)}\n{proc.stdout}")  # in one piece: stages may run at once
    sys.stdout.flush()
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    return f".venv/bin/python {shlex.join(argv)}", stage.read(proc.stdout)


def commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def render(results: list[tuple[str, Rows]], *, when: datetime.date, rev: str) -> str:
    lines = [START, "",
             f"Measured on {when.isoformat()} at commit `{rev}`, on {os.cpu_count()} cores with PostgreSQL 18 and "
             "durable commits, by `make bench-report`, which wrote this table. Each row's command prints "
             "its figures again; they move by about ±15 % from run to run on a shared machine.", "",
             '<div class="figures" markdown>', "",
             "| what | figure | command |", "| --- | --- | --- |"]
    for command, rows in results:
        script = command.split()[1]
        lines += [f"| {what} | {figure} | `{script}` |" for what, figure in rows]
    lines += ["", "</div>", "", "The commands, as run (a difference of a few µs in the index rows is noise):", ""]
    lines += [f"- `{command}`" for command, _ in results]
    return "\n".join([*lines, "", END])


def write(output: Path, table: str) -> None:
    """Put the table between the markers of `output` (appended when it has none)."""
    text = output.read_text(encoding="utf-8") if output.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + table + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + table + "\n"
    output.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "performance.md")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the report, figures mean nothing")
    args = parser.parse_args()
    if args.tiny:  # each benchmark on its own server, side by side: the figures mean nothing anyway
        with ThreadPoolExecutor(len(STAGES)) as pool:
            results = list(pool.map(lambda stage: run_stage(stage, True), STAGES))
    else:  # one at a time, so that no benchmark's figures pay for another's load
        results = [run_stage(stage, False) for stage in STAGES]
    write(args.output, render(results, when=datetime.date.today(), rev=commit()))
    print(f"wrote the table to {args.output}")


if __name__ == "__main__":
    main()
