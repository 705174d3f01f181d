"""HTTP API throughput and latency with `hey` at 64 connections, beside a bare FastAPI app (prints figures).

Measures, against one real `jobdesk api` on a private embedded PostgreSQL, and in the same run
`benchmarks/bare_api.py` (a bare FastAPI app that answers constants, served with the same uvicorn
options and as many processes):
  - bare GET /const and bare POST /const (a body like the enqueue's): the baseline;
  - GET /api/ping: a constant route of jobdesk's own app;
  - POST /api/jobs (group-committed enqueues), with a worker running at the same time;
  - GET /api/jobs/{id};
  - POST /api/jobs again with the worker stopped (SIGSTOP) meanwhile: the API and the database
    alone, without the worker's claims and completions beside them (the jobs are done before
    the next round);
then prints req/s, p50 and p99 of each, the CPU each process group spent per request (the API's
processes, the bare app's, PostgreSQL's, the worker's, and hey's own), and the ratios: POST
/api/jobs to the bare POST and GET /api/jobs/{id} to the bare GET, in throughput and in p99. It
checks that the worker completed every enqueued job. The machine is shared: compare the ratios,
not the absolute numbers.

    .venv/bin/python benchmarks/api_bench.py [--seconds 4] [--rounds 3] [--workers N]

The routes are measured in turn, `--rounds` times, `--seconds` each: a burst of load from a
neighbour on this shared machine then hits one round of each rather than one route's whole
measure. It prints each round, then the median of each figure and of each round's ratios.
`--workers` is passed to `jobdesk api` and to the bare app alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobdesk.console.platform_check import install_debian_packages  # noqa: E402
from jobdesk.embedded.server import EmbeddedServer  # noqa: E402
from tests.api.test_api_server import free_port  # noqa: E402
from tests.helpers import JOBDESK, cli_env, run_cli  # noqa: E402

ENQUEUE_BODY = '{"type": "noop", "input_data": {}}'
BARE_GET, BARE_POST, PING, ENQUEUE, GET = (
    "bare GET /const", "bare POST /const", "GET /api/ping", "POST /api/jobs", "GET /api/jobs/{id}")
ENQUEUE_ALONE = "POST, worker paused"  # POST /api/jobs again, the worker stopped meanwhile
# Whose CPU is counted per request: each a process and its descendants (hey: the children waited for).
GROUPS = ("api", "bare", "postgres", "worker", "hey")
TICK = os.sysconf("SC_CLK_TCK")


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
    requests = sum(int(n) for n in codes.values())
    return {"rps": rps, "p50_ms": p50 * 1000, "p99_ms": p99 * 1000, "codes": codes,  # type: ignore[dict-item]
            "requests": requests}


def _process_table() -> dict[int, tuple[int, float]]:
    """Every process: its parent and the CPU seconds it has used (user + system), from /proc."""
    table: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rfind(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK)
    return table


def cpu_by_group(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each root process and its descendants."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[str, float] = {}
    for name, root in roots.items():
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            total += table.get(pid, (0, 0.0))[1]
            todo += children.get(pid, [])
        out[name] = total
    return out


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def cpu_per_request(roots: dict[str, int], result: Callable[[], dict[str, float]]) -> Iterator[None]:
    """Adds to the measure `result()` returns the µs of CPU each group spent per request."""
    before, hey_before = cpu_by_group(roots), children_cpu()
    yield
    after, hey_after = cpu_by_group(roots), children_cpu()
    measured = result()
    used = {name: after[name] - before[name] for name in roots} | {"hey": hey_after - hey_before}
    for name, seconds in used.items():
        measured[f"cpu_{name}_us"] = seconds * 1e6 / max(measured["requests"], 1)


async def count(dsn: str, where: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(f"SELECT count(*) FROM jobs WHERE {where}"))
    finally:
        await conn.close()


def wait_until_up(url: str, proc: subprocess.Popen[str]) -> None:
    for _ in range(300):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args!r} exited with {proc.returncode}")
        time.sleep(0.1)
    raise SystemExit(f"{url} did not answer within 30 s")


@contextmanager
def paused(pid: int | None, dsn: str) -> Iterator[None]:
    """The worker stopped (SIGSTOP) meanwhile, when `pid` is given; afterwards it runs on, and
    the jobs enqueued meanwhile are done before the next measure starts."""
    if pid is None:
        yield
        return
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 120
    while asyncio.run(count(dsn, "status <> 'completed'")) and time.monotonic() < deadline:
        time.sleep(0.5)


def measure_round(binary: str, seconds: float, routes: dict[str, tuple[str, str | None]], token: str,
                  roots: dict[str, int], dsn: str) -> dict[str, dict[str, float]]:
    measured: dict[str, dict[str, float]] = {}
    for name, (url, body) in routes.items():
        with paused(roots["worker"] if name == ENQUEUE_ALONE else None, dsn), \
                cpu_per_request(roots, lambda name=name: measured[name]):  # type: ignore[misc]
            measured[name] = hey(binary, seconds, url, token, post=body)
    return measured


def report(rounds: list[dict[str, dict[str, float]]], args: argparse.Namespace) -> None:
    print(f"jobdesk api --workers {args.workers} beside the bare app on as many processes; "
          f"{args.rounds} rounds of {args.seconds:g} s per route, 64 connections")
    for i, measured in enumerate(rounds, 1):
        print(f"round {i}: " + ", ".join(f"{name} {r['rps']:.0f} req/s p99 {r['p99_ms']:.1f} ms"
                                         for name, r in measured.items()))
    print(f"{'':<20} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7}   CPU µs per request: "
          + " ".join(f"{g:>8}" for g in GROUPS) + "   codes")
    for name in rounds[0]:
        med = {k: statistics.median(r[name][k] for r in rounds) for k in rounds[0][name] if k != "codes"}
        codes = sorted({code for r in rounds for code in r[name]["codes"]})  # type: ignore[attr-defined]
        print(f"{name:<20} {med['rps']:>7.0f} {med['p50_ms']:>7.1f} {med['p99_ms']:>7.1f}   {'':<20}"
              + " ".join(f"{med[f'cpu_{g}_us']:>8.0f}" for g in GROUPS) + f"   {codes}")

    def ratio(a: str, b: str, key: str) -> float:
        return statistics.median(r[a][key] / r[b][key] for r in rounds)

    print("medians of the rounds' ratios:")
    for route, bare, target in ((ENQUEUE, BARE_POST, 0.6), (GET, BARE_GET, 0.8), (ENQUEUE_ALONE, BARE_POST, 0.6)):
        print(f"  {route} / {bare}: throughput {ratio(route, bare, 'rps'):.2f} (target >= {target}), "
              f"p99 {ratio(route, bare, 'p99_ms'):.2f}x (target <= 1.5x)")
    print(f"  {PING} / {BARE_GET}: throughput {ratio(PING, BARE_GET, 'rps'):.2f}, "
          f"p99 {ratio(PING, BARE_GET, 'p99_ms'):.2f}x")
    print(f"  same app: {ENQUEUE} / {PING} {ratio(ENQUEUE, PING, 'rps'):.2f}, "
          f"{GET} / {PING} {ratio(GET, PING, 'rps'):.2f}")


def start_servers(dsn: str, workers: int) -> tuple[list[subprocess.Popen[str]], str, str]:
    """`jobdesk api` and the bare app, each on `workers` processes; their base URLs once they answer."""
    api_url, bare_url = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    api = subprocess.Popen([*JOBDESK, "api", "--port", api_url.rsplit(":", 1)[1], "--workers", str(workers)],
                           env=cli_env(dsn), text=True, cwd=ROOT)
    bare = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "bare_api.py"), "--port",
                             bare_url.rsplit(":", 1)[1], "--workers", str(workers)], text=True, cwd=ROOT)
    wait_until_up(f"{api_url}/healthz", api)
    wait_until_up(f"{bare_url}/const", bare)
    return [api, bare], api_url, bare_url


def first_job(url: str, auth: dict[str, str]) -> str:
    """Enqueues a job and waits for the worker to run it; its id."""
    job_id: str = httpx.post(f"{url}/api/jobs", json={"type": "noop", "input_data": {}}, headers=auth).json()["id"]
    deadline = time.monotonic() + 60
    while httpx.get(f"{url}/api/jobs/{job_id}", headers=auth).json()["status"] != "completed":
        if time.monotonic() > deadline:
            raise SystemExit("the worker did not run the first job within 60 s")
        time.sleep(0.2)
    return job_id


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4, help="per route and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1, help="`jobdesk api --workers N`, and the bare app's")
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
        procs, url, bare_url = start_servers(dsn, args.workers)
        worker_log = Path(tempfile.mkdtemp(prefix="jdapiw-")) / "worker.log"
        procs.append(subprocess.Popen([*JOBDESK, "worker"], env=cli_env(dsn, MAX_CONCURRENT_JOBS="50"),
                                      text=True, cwd=ROOT, stdout=worker_log.open("w"), stderr=subprocess.STDOUT))
        # Measure nothing until the worker has started and run a job: its start-up (imports,
        # registration) would otherwise eat into the first route's share of the CPU.
        job_id = first_job(url, {"Authorization": f"Bearer {token}"})
        time.sleep(1)
        routes = {BARE_GET: (f"{bare_url}/const", None), BARE_POST: (f"{bare_url}/const", ENQUEUE_BODY),
                  PING: (f"{url}/api/ping", None), ENQUEUE: (f"{url}/api/jobs", ENQUEUE_BODY),
                  GET: (f"{url}/api/jobs/{job_id}", None), ENQUEUE_ALONE: (f"{url}/api/jobs", ENQUEUE_BODY)}
        postmaster = int((server.pgdata / "postmaster.pid").read_text().split()[0])
        roots = {"api": procs[0].pid, "bare": procs[1].pid, "postgres": postmaster, "worker": procs[2].pid}
        rounds = [measure_round(binary, args.seconds, routes, token, roots, dsn) for _ in range(args.rounds)]
        total = asyncio.run(count(dsn, "true"))
        deadline = time.monotonic() + 120
        while asyncio.run(count(dsn, "status <> 'completed'")) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = asyncio.run(count(dsn, "status <> 'completed'"))
        report(rounds, args)
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
