"""The command line's start-up: how long each command a person types takes, beside `python -c pass`
(prints figures).

On a private embedded PostgreSQL, migrated and seeded with jobs, each command is launched as a user
launches it (the venv's `jobdesk` console script, from a folder of no project, with DATABASE_URL
set) and timed from launch to exit; the runs of all commands are interleaved, and each command's
median is printed. The worker's figure is the time from its launch to the start of a job enqueued
before it (`benchmarks/startup_bench.py`).

    .venv/bin/python benchmarks/cli_bench.py [--runs 7] [--jobs 1000] [--other /older/checkout]

`--other DIR` measures another checkout's jobdesk (a copy of the repository, e.g. from `git archive`)
in the same run, interleaved, with this venv's Python; both are then launched as
`python -c "...launcher.main()"` with their own folder first on the path, so that the two differ only
in their code.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.startup_bench import one_start, worker_env  # noqa: E402
from jobdesk.embedded.server import EmbeddedServer  # noqa: E402
from tests.helpers import run_cli  # noqa: E402

SEED = """INSERT INTO jobs (type, user_id, input_data)
          SELECT 'noop', 1, jsonb_build_object('n', n) FROM generate_series(1, %s) AS n"""


def one_run(command: list[str], dsn: str) -> float:
    """Seconds from launching `command` to its exit; a failure stops the benchmark."""
    t0 = time.perf_counter()
    done = subprocess.run(command, env=worker_env(dsn), cwd=tempfile.gettempdir(), capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed


# What the console script runs, with the jobdesk of a given checkout.
LAUNCH = "import sys; sys.path.insert(0, {root!r}); from jobdesk.console.launcher import main; sys.exit(main())"


def jobdesk_commands(job_id: str, jobdesk: list[str], label: str = "") -> dict[str, list[str]]:
    return {
        f"jobdesk --version{label}": [*jobdesk, "--version"],
        f"jobdesk --help{label}": [*jobdesk, "--help"],
        f"jobdesk jobs --limit 20{label}": [*jobdesk, "jobs", "--limit", "20"],
        f"jobdesk show ID{label}": [*jobdesk, "show", job_id],
        f"jobdesk worker{label}": [*jobdesk, "worker"],
    }


def commands(job_id: str, other: Path | None) -> dict[str, list[str]]:
    measured = {"python -c pass": [sys.executable, "-c", "pass"]}
    if other is None:
        script = Path(sys.executable).parent / "jobdesk"  # the console script, as a user launches it
        jobdesk = [str(script)] if script.exists() else [sys.executable, "-m", "jobdesk.cli"]
        return {**measured, **jobdesk_commands(job_id, jobdesk)}
    for root, label in ((ROOT, " (this checkout)"), (other.resolve(), f" ({other})")):
        measured.update(jobdesk_commands(job_id, [sys.executable, "-c", LAUNCH.format(root=str(root))], label))
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=1000, help="jobs seeded for `jobs` and `show` to read")
    parser.add_argument("--other", type=Path, help="another checkout to measure in the same run")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="jdcli-"))
    root.chmod(0o755)
    server = EmbeddedServer(root)
    dsn = server.ensure_running()
    try:
        assert run_cli("migrate", dsn=dsn).returncode == 0
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SEED, (args.jobs,))
            job_id = str(conn.execute("SELECT id FROM jobs ORDER BY id LIMIT 1").fetchone()[0])  # type: ignore[index]
        measured = commands(job_id, args.other)
        workers = {name: command for name, command in measured.items() if command[-1] == "worker"}
        for name in workers:
            del measured[name]
        times: dict[str, list[float]] = {name: [] for name in [*measured, *workers]}
        for command in measured.values():  # a first launch warms the file cache; it is not counted
            one_run(command, dsn)
        for _ in range(args.runs):
            for name, command in measured.items():
                times[name].append(one_run(command, dsn))
        # Then the workers (each run deletes every job and enqueues the one it waits for).
        for command in workers.values():
            one_start(command, dsn)
        for _ in range(args.runs):
            for name, command in workers.items():
                times[name].append(one_start(command, dsn)[0])
        width = max(len(name) for name in times)
        print(f"median of {args.runs} runs, wall seconds from launch to exit (a worker: to its first job's start):")
        for name, got in times.items():
            print(f"  {name:<{width}}  {statistics.median(got):.3f} s  (min {min(got):.3f}, max {max(got):.3f})")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
