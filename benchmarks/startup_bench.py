"""Worker start-up: from the launch of `jobdesk worker` to the start of the first job (prints figures).

On a private embedded PostgreSQL, migrated beforehand, each run enqueues one no-op job, launches a
worker process and polls until the job's `started_at` is set: start-up = `started_at` - the time
just before the launch (both wall clock on this machine), as the peers' harness measures it. The
worker is then stopped with SIGTERM and the next run begins. Median and spread of the runs.

    .venv/bin/python benchmarks/startup_bench.py [--runs 7] [--command "/other/checkout/.venv/bin/jobdesk worker"]

`--command` (repeatable) measures other worker commands in the same run, interleaved, e.g. the
same command from an older checkout, so that their figures can be compared within one run.
`--imports` also prints the ten slowest imports of `jobdesk worker` (`python -X importtime`).
`--idle` also measures the first jobs of a worker that started with nothing to do: launched on an
empty queue, left idle for a second, then given one job at a time (20 ms apart), each job's
latency from just before its INSERT to its `started_at`. The first includes the first INSERT of
the benchmark's new session (~3 ms more: PostgreSQL compiles the triggers' functions for the session).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobdesk.embedded.server import EmbeddedServer  # noqa: E402
from tests.helpers import JOBDESK, cli_env, run_cli  # noqa: E402

ENQUEUE = "INSERT INTO jobs (type, user_id, input_data) VALUES ('noop', 1, '{}') RETURNING id"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_env(dsn: str) -> dict[str, str]:
    """The environment a user's worker has: each command imports jobdesk from its own venv
    (no PYTHONPATH into this checkout), from a folder of no project."""
    env = cli_env(dsn, MAX_CONCURRENT_JOBS="10")
    env.pop("PYTHONPATH", None)
    return env


def one_start(command: list[str], dsn: str) -> tuple[float, float]:
    """Seconds from launching `command` to the start of a job enqueued before it, and the CPU
    seconds the worker process had used when that start was seen (less sensitive to a loaded machine)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM jobs")
        job_id = conn.execute(ENQUEUE).fetchone()[0]  # type: ignore[index]
        t0 = time.time()
        proc = subprocess.Popen(command, env=worker_env(dsn), cwd=tempfile.gettempdir(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                row = conn.execute("SELECT extract(epoch FROM started_at)::float8 FROM jobs WHERE id = %s",
                                   (job_id,)).fetchone()
                if row and row[0] is not None:
                    return float(row[0]) - t0, cpu_seconds(proc.pid)
                time.sleep(0.005)
            raise SystemExit(f"{shlex.join(command)} did not start a job within 30 s")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


IDLE_JOBS = 4  # jobs given one at a time to a worker that started idle


def idle_start(command: list[str], dsn: str) -> list[float]:
    """Milliseconds from just before each INSERT to the job's start, for IDLE_JOBS jobs given one
    at a time to `command` after it has been idle for a second since its launch."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM jobs")
        proc = subprocess.Popen(command, env=worker_env(dsn), cwd=tempfile.gettempdir(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            latencies = []
            for _ in range(IDLE_JOBS):
                time.sleep(0.02)
                t0 = time.time()
                job_id = conn.execute(ENQUEUE).fetchone()[0]  # type: ignore[index]
                deadline = time.monotonic() + 30
                while True:
                    row = conn.execute("SELECT extract(epoch FROM started_at)::float8 FROM jobs WHERE id = %s",
                                       (job_id,)).fetchone()
                    if row and row[0] is not None:
                        latencies.append((float(row[0]) - t0) * 1000)
                        break
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{shlex.join(command)} did not start a job within 30 s")
                    time.sleep(0.0005)
            return latencies
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def slowest_imports(dsn: str, n: int = 10) -> list[tuple[int, str]]:
    """The `n` imports with the most cumulative time while `jobdesk worker` starts and runs briefly."""
    env = {**cli_env(dsn), "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.Popen(JOBDESK + ["worker"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split("|")
            rows.append((int(cumulative), name.rstrip()))
    top = [r for r in rows if r[1].startswith(" ") and not r[1].startswith("  ")]  # top level imports only
    return sorted(top, reverse=True)[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--command", action="append", default=[],
                        help="another worker command to measure in the same run (repeatable)")
    parser.add_argument("--imports", action="store_true", help="print the slowest top-level imports too")
    parser.add_argument("--idle", action="store_true",
                        help="also measure the first jobs of a worker that started with nothing to do")
    args = parser.parse_args()
    script = Path(sys.executable).parent / "jobdesk"  # the console script, as a user launches it
    commands = {"jobdesk worker (this checkout)": [str(script) if script.exists() else JOBDESK[0], *(
        [] if script.exists() else JOBDESK[1:]), "worker"]}
    commands.update({c: shlex.split(c) for c in args.command})
    root = Path(tempfile.mkdtemp(prefix="jdstart-"))
    root.chmod(0o755)
    server = EmbeddedServer(root)
    dsn = server.ensure_running()
    try:
        assert run_cli("migrate", dsn=dsn).returncode == 0
        for command in commands.values():  # a first launch warms the file cache; it is not counted
            one_start(command, dsn)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                times[name].append(one_start(command, dsn))
        for name, got in times.items():
            wall = [w for w, _ in got]
            cpu = [c for _, c in got]
            print(f"{name}: start-up median {statistics.median(wall):.3f} s (min {min(wall):.3f}, "
                  f"max {max(wall):.3f}, {len(got)} runs); worker CPU by then {statistics.median(cpu):.3f} s")
        if args.idle:
            idle: dict[str, list[list[float]]] = {name: [] for name in commands}
            for _ in range(args.runs):
                for name, command in commands.items():
                    idle[name].append(idle_start(command, dsn))
            for name, runs in idle.items():
                each = ", ".join(f"{statistics.median(r[i] for r in runs):.1f}" for i in range(IDLE_JOBS))
                print(f"{name}: after an idle start, jobs 1-{IDLE_JOBS} one at a time: {each} ms "
                      f"(medians of {len(runs)} runs)")
        if args.imports:
            print("slowest top-level imports of `jobdesk worker` (cumulative ms):")
            for us, name in slowest_imports(dsn):
                print(f"  {us / 1000:7.1f}  {name.strip()}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
