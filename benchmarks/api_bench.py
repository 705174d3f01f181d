"""HTTP API throughput and latency with `hey` at 64 connections (prints figures).

Measures, against one real `jobdesk api` on a private embedded PostgreSQL:
  - GET /api/ping: a constant route of the same app, the framework's ceiling on this machine;
  - POST /api/jobs (group-committed enqueues), with a worker running at the same time;
  - GET /api/jobs/{id};
then prints req/s, p50 and p99 of each and the ratios to the ceiling, and checks that the worker
completed every enqueued job. The machine is shared: compare the ratios, not the absolute numbers.

    .venv/bin/python benchmarks/api_bench.py [--seconds 4] [--rounds 3] [--workers N]

The three are measured in turn, `--rounds` times, `--seconds` each: a burst of load from a
neighbour on this shared machine then hits one round of each rather than one route's whole
measure. It prints each round, then the median of each figure and of each round's ratios.
`--workers` is passed to `jobdesk api`; the ceiling is measured on those same processes.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobdesk.console.platform_check import install_debian_packages  # noqa: E402
from jobdesk.embedded.server import EmbeddedServer  # noqa: E402
from tests.api.test_api_server import free_port  # noqa: E402
from tests.helpers import JOBDESK, cli_env, run_cli  # noqa: E402


def ensure_hey() -> str:
    found = shutil.which("hey")
    if found:
        return found
    if not install_debian_packages(["hey"], why="for the HTTP benchmark"):
        raise SystemExit("the HTTP benchmark needs hey: apt-get install hey (as root)")
    return shutil.which("hey") or "hey"


def hey(binary: str, seconds: float, url: str, token: str, *, post: str | None = None) -> dict[str, float]:
    args = [binary, "-z", f"{seconds}s", "-c", "64", "-H", f"Authorization: Bearer {token}"]
    if post is not None:
        args += ["-m", "POST", "-T", "application/json", "-d", post]
    out = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = float(re.search(r"50%+ in ([\d.]+) secs", out).group(1))  # type: ignore[union-attr]
    p99 = float(re.search(r"99%+ in ([\d.]+) secs", out).group(1))  # type: ignore[union-attr]
    codes = dict(re.findall(r"\[(\d{3})\]\s+(\d+) responses", out))
    return {"rps": rps, "p50_ms": p50 * 1000, "p99_ms": p99 * 1000, "codes": codes}  # type: ignore[dict-item]


async def count(dsn: str, where: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(f"SELECT count(*) FROM jobs WHERE {where}"))
    finally:
        await conn.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4, help="per route and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1, help="`jobdesk api --workers N`")
    args = parser.parse_args()
    binary = ensure_hey()
    root = Path(tempfile.mkdtemp(prefix="jdapib-"))
    root.chmod(0o755)
    server = EmbeddedServer(root)
    dsn = server.ensure_running()
    procs: list[subprocess.Popen[str]] = []
    try:
        assert run_cli("migrate", dsn=dsn).returncode == 0
        token = run_cli("token", "create", "--name", "bench", dsn=dsn).stdout.strip()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        procs.append(subprocess.Popen([*JOBDESK, "api", "--port", str(port), "--workers", str(args.workers)],
                                      env=cli_env(dsn), text=True, cwd=ROOT))
        for _ in range(200):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        worker_log = Path(tempfile.mkdtemp(prefix="jdapiw-")) / "worker.log"
        procs.append(subprocess.Popen([*JOBDESK, "worker"], env=cli_env(dsn, MAX_CONCURRENT_JOBS="50"),
                                      text=True, cwd=ROOT, stdout=worker_log.open("w"), stderr=subprocess.STDOUT))
        auth = {"Authorization": f"Bearer {token}"}
        job_id = httpx.post(f"{url}/api/jobs", json={"type": "noop", "input_data": {}}, headers=auth).json()["id"]
        # Measure nothing until the worker has started and run that job: its start-up (imports,
        # registration) would otherwise eat into the ceiling's share of the CPU.
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/api/jobs/{job_id}", headers=auth).json()["status"] != "completed":
            if time.monotonic() > deadline:
                raise SystemExit("the worker did not run the first job within 60 s")
            time.sleep(0.2)
        time.sleep(1)
        names = ("ceiling GET /api/ping", "POST /api/jobs", "GET /api/jobs/{id}")
        rounds: list[dict[str, dict[str, float]]] = []
        for _ in range(args.rounds):
            rounds.append(dict(zip(names, (
                hey(binary, args.seconds, f"{url}/api/ping", token),
                hey(binary, args.seconds, f"{url}/api/jobs", token, post='{"type": "noop", "input_data": {}}'),
                hey(binary, args.seconds, f"{url}/api/jobs/{job_id}", token)), strict=True)))
        total = asyncio.run(count(dsn, "true"))
        deadline = time.monotonic() + 120
        while asyncio.run(count(dsn, "status <> 'completed'")) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = asyncio.run(count(dsn, "status <> 'completed'"))
        print(f"jobdesk api --workers {args.workers}; every route, the ceiling too, on the same processes; "
              f"{args.rounds} rounds of {args.seconds:g} s per route")
        for i, measured in enumerate(rounds, 1):
            print(f"round {i}: " + ", ".join(f"{name.split()[-1]} {r['rps']:.0f} req/s p99 {r['p99_ms']:.1f} ms"
                                             for name, r in measured.items()))
        ceiling, enqueue, get = names
        for name in names:
            med = {k: statistics.median(r[name][k] for r in rounds) for k in ("rps", "p50_ms", "p99_ms")}
            codes = sorted({code for r in rounds for code in r[name]["codes"]})  # type: ignore[attr-defined]
            print(f"{name:<24} {med['rps']:>8.0f} req/s  p50 {med['p50_ms']:6.1f} ms  p99 {med['p99_ms']:6.1f} ms  "
                  f"(medians)  codes {codes}")
        share = {name: statistics.median(r[name]["rps"] / r[ceiling]["rps"] for r in rounds) for name in names}
        print(f"enqueue / ceiling {share[enqueue]:.0%} (target 50%), GET / ceiling {share[get]:.0%} (target 70%) "
              f"(medians of the rounds' ratios)")
        print(f"worker: {total - left} of {total} jobs completed" + ("" if left == 0 else " (NOT ALL)"))
        if left:
            print("worker log (last lines):\n" + "\n".join(worker_log.read_text().splitlines()[-15:]))
        return 0 if left == 0 else 1
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=40)
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
