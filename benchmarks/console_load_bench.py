"""What an open console costs at production rates. Prints figures.

A million jobs are seeded by plain SQL; a writer process then inserts jobs and marks others
completed, by plain SQL, at a steady rate; and 1, then 3 consoles (`jobdesk`, no subcommand,
offscreen, each a process of its own) are left open on one tab. CPU is read from /proc: the
consoles' processes, and the PostgreSQL backends whose application_name is the console's
(`jobdesk-console`). Both are printed per console, in ms of CPU per second of wall time. The
server runs without parallel query, so that no part of a console's query runs in a process
that the reading of its backends misses.

    python benchmarks/console_load_bench.py [--jobs 1000000] [--rate 1000] [--seconds 60]
        [--tab Jobs,Pipelines,...] [--consoles 1,3] [--statements]
    python benchmarks/console_load_bench.py --jobs 200000 --seconds 20     # quick

--statements loads pg_stat_statements and prints the statements that took the most time while
the consoles were measured (the writer's among them), to see where a console's cost goes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

from benchmarks.harness import _stat_fields, private_server  # noqa: E402
from tests import pg  # noqa: E402

CONSOLE_APP = "jobdesk-console%"  # the application_name of a console's pool
TYPES = ("email.send", "video.render", "resize", "echo")
TICK_S = 0.1  # the writer writes this often, one INSERT and one UPDATE a tick
COMPLETE_AFTER_S = 2.0  # the writer completes the jobs it inserted this long ago


# -- seeding -------------------------------------------------------------------------------------

async def seed(dsn: str, n: int) -> None:
    """`n` jobs by plain SQL, a million a statement: mostly finished, some failed, waiting for
    approval, cancelled and queued, created over the last n seconds."""
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.perf_counter()
        for start in range(0, n, 1_000_000):
            await conn.execute("""
                INSERT INTO jobs (type, input_data, status, error_message, retry_count, created_at, updated_at,
                                  started_at, completed_at)
                SELECT (ARRAY['email.send', 'video.render', 'resize', 'echo'])[1 + g % 4],
                       jsonb_build_object('n', g), s,
                       CASE WHEN s = 'failed' THEN 'Error ' || g END, g % 3,
                       now() - make_interval(secs => $2 - g), now() - make_interval(secs => $2 - g),
                       CASE WHEN s IN ('completed', 'failed') THEN now() - make_interval(secs => $2 - g) END,
                       CASE WHEN s = 'completed' THEN now() - make_interval(secs => $2 - g) END
                  FROM generate_series($1 + 1, least($1 + 1000000, $2)) g,
                       LATERAL (SELECT (ARRAY['completed', 'completed', 'completed', 'completed', 'failed',
                                              'waiting_approval', 'cancelled', 'queued'])[1 + g % 8] AS s) st""",
                               start, n)
        await conn.execute("VACUUM ANALYZE jobs")
        print(f"seeded {n:,} jobs in {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        await conn.close()


# -- the writer ----------------------------------------------------------------------------------

def writer(dsn: str, rate: int, inserted: mp.Value, completed: mp.Value) -> None:  # type: ignore[type-arg]
    """A process of its own: `rate` jobs/s inserted and `rate` jobs/s completed, by plain SQL."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(_write(dsn, rate, inserted, completed))


async def _write(dsn: str, rate: int, inserted: mp.Value, completed: mp.Value) -> None:  # type: ignore[type-arg]
    conn = await asyncpg.connect(dsn)
    backlog: list[tuple[float, list[str]]] = []  # (inserted at, ids), oldest first
    seq = 0
    t0 = time.monotonic()
    while True:
        now = time.monotonic()
        due = int(rate * (now - t0)) - inserted.value
        if due > 0:
            ids = [f"load-{seq + i}" for i in range(due)]
            seq += due
            await conn.execute("""
                INSERT INTO jobs (id, type, input_data)
                SELECT id, ($2::text[])[1 + (ord % 4)::int], jsonb_build_object('n', ord)
                  FROM unnest($1::text[]) WITH ORDINALITY AS u(id, ord)""", ids, list(TYPES))
            backlog.append((now, ids))
            inserted.value += due
        ready: list[str] = []
        while backlog and backlog[0][0] <= now - COMPLETE_AFTER_S:
            ready.extend(backlog.pop(0)[1])
        if ready:
            await conn.execute("""
                UPDATE jobs SET status = 'completed', started_at = now() - interval '50 milliseconds',
                                completed_at = now(), updated_at = now(), result_data = '{}'
                 WHERE id = ANY($1::text[])""", ready)
            completed.value += len(ready)
        await asyncio.sleep(max(0.0, TICK_S - (time.monotonic() - now)))


# -- the consoles --------------------------------------------------------------------------------

def console_child(tab: str) -> int:
    """Run here as a console process: `jobdesk` with no subcommand, switched to `tab` once its
    window is open."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("QT_API", "pyside6")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QTabWidget

    from jobdesk.console import app as console_app

    qapp = QApplication([sys.argv[0]])

    def switch() -> None:
        for widget in qapp.topLevelWidgets():
            tabs = widget.findChild(QTabWidget)
            if tabs is not None:
                for i in range(tabs.count()):
                    if tabs.tabText(i).split(" ")[0] == tab:
                        tabs.setCurrentIndex(i)
                return
        QTimer.singleShot(100, switch)

    QTimer.singleShot(0, switch)
    return console_app.main(["--no-worker"])


@contextlib.contextmanager
def consoles(dsn: str, n: int, tab: str, config: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    env = {**os.environ, "DATABASE_URL": dsn, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(config),
           "JOBDESK_AUTOSTART_WORKER": "false", "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, __file__, "--console-child", tab], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def tree_ticks(pids: list[int]) -> dict[int, int]:
    """utime + stime, in clock ticks, of these processes and all their descendants."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _stat_fields(stat.read_text())
            pid = int(stat.parent.name)
            children.setdefault(int(fields[1]), []).append(pid)
            ticks[pid] = int(fields[11]) + int(fields[12])
    found: dict[int, int] = {}
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in ticks and pid not in found:
            found[pid] = ticks[pid]
            todo.extend(children.get(pid, []))
    return found


async def backend_ticks(conn: asyncpg.Connection) -> dict[int, int]:
    pids = [r["pid"] for r in await conn.fetch(
        "SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1", CONSOLE_APP)]
    return tree_ticks(pids)


def spent(before: dict[int, int], after: dict[int, int]) -> float:
    """CPU seconds between two readings; a process that appeared meanwhile counts from zero."""
    return sum(t - before.get(pid, 0) for pid, t in after.items()) / os.sysconf("SC_CLK_TCK")


async def wait_connected(conn: asyncpg.Connection, n: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1",
                              CONSOLE_APP) < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"{n} consoles did not connect within {timeout:.0f} s")
        await asyncio.sleep(0.5)


async def measure(dsn: str, n: int, tab: str, args: argparse.Namespace, counters: tuple[mp.Value, mp.Value],  # type: ignore[type-arg]
                  writing: mp.process.BaseProcess, config: Path) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        with consoles(dsn, n, tab, config) as procs:
            await wait_connected(conn, n)
            await asyncio.sleep(args.warmup)  # the first screen is read; the pools fill
            if args.statements:
                await conn.execute("SELECT pg_stat_statements_reset()")
            pg0, own0 = await backend_ticks(conn), tree_ticks([p.pid for p in procs])
            ins0, done0 = counters[0].value, counters[1].value
            t0 = time.monotonic()
            await asyncio.sleep(args.seconds)
            pg1, own1 = await backend_ticks(conn), tree_ticks([p.pid for p in procs])
            wall = time.monotonic() - t0
            ins1, done1 = counters[0].value, counters[1].value
            dead = [p.pid for p in procs if p.poll() is not None]
            if not writing.is_alive():
                raise SystemExit("the writer stopped")
            if dead:
                raise SystemExit(f"consoles {dead} exited while measured")
        pg_ms, own_ms = spent(pg0, pg1) / wall * 1000 / n, spent(own0, own1) / wall * 1000 / n
        print(f"CONSOLES {n} on {tab}: PostgreSQL {pg_ms:.1f} ms/s per console, console {own_ms:.1f} ms/s "
              f"per console; rates {(ins1 - ins0) / wall:,.0f} inserted/s + {(done1 - done0) / wall:,.0f} "
              f"completed/s over {wall:.0f} s", flush=True)
        if args.statements:
            await print_statements(conn)
    finally:
        await conn.close()


async def print_statements(conn: asyncpg.Connection) -> None:
    rows = await conn.fetch("""
        SELECT calls, round(total_exec_time::numeric, 1) AS ms, rows,
               regexp_replace(left(query, 110), '\\s+', ' ', 'g') AS query
          FROM pg_stat_statements WHERE query NOT ILIKE '%pg_stat%'
         ORDER BY total_exec_time DESC LIMIT 15""")
    for r in rows:
        print(f"    {r['ms']:>9} ms {r['calls']:>7} calls {r['rows']:>9} rows  {r['query']}", flush=True)


async def configure(server_dsn: str, *, statements: bool) -> None:
    """No parallel query: a parallel worker's CPU would escape the reading of the backends (it
    lives a moment, apart from them). With `statements`, pg_stat_statements (after a restart)."""
    conn = await asyncpg.connect(pg.with_database(server_dsn, "postgres"))
    try:
        await conn.execute("ALTER SYSTEM SET max_parallel_workers_per_gather = 0")
        if statements:
            await conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs seeded before measuring")
    parser.add_argument("--rate", type=int, default=1000, help="jobs/s inserted, and jobs/s completed")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window per run")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds the consoles run before measuring")
    parser.add_argument("--tab", default="Jobs", help="the tab the consoles are left on (a list: one run each)")
    parser.add_argument("--consoles", default="1,3", help="numbers of consoles, one run each")
    parser.add_argument("--statements", action="store_true", help="print the top statements (pg_stat_statements)")
    parser.add_argument("--console-child", metavar="TAB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.console_child:
        sys.exit(console_child(args.console_child))

    with private_server() as server, tempfile.TemporaryDirectory(prefix="jdload-") as config:
        asyncio.run(configure(server.dsn, statements=args.statements))
        if args.statements:
            server.stop()
            server.ensure_running()

        async def prepare() -> str:
            await pg.build_template(server.dsn)
            dsn = await pg.create_test_database(server.dsn)
            if args.statements:
                conn = await asyncpg.connect(dsn)
                await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                await conn.close()
            await seed(dsn, args.jobs)
            return dsn

        dsn = asyncio.run(prepare())
        ctx = mp.get_context("spawn")
        counters = (ctx.Value("q", 0), ctx.Value("q", 0))
        proc = ctx.Process(target=writer, args=(dsn, args.rate, *counters), name="writer", daemon=True)
        proc.start()
        try:
            time.sleep(COMPLETE_AFTER_S)  # the writer's first completions
            for tab in args.tab.split(","):
                for n in (int(x) for x in args.consoles.split(",")):
                    asyncio.run(measure(dsn, n, tab, args, counters, proc, Path(config)))
        finally:
            proc.terminate()
            proc.join(10)


if __name__ == "__main__":
    main()
