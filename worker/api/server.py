"""`jobdesk api`: checks, then the app under uvicorn. SIGTERM lets requests in flight finish,
ends SSE streams and long-polls, and exits 0."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

import uvicorn

from jobdesk.api.app import InputValidator, accept_any_input, create_app
from jobdesk.core.errors import JobdeskError
from jobdesk.core.settings import Settings
from jobdesk.observe import otel_setup
from jobdesk.service.jobs import JobService
from jobdesk.store.db import Database, describe


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(uvicorn.Server):
    """uvicorn's server, which also tells waiting streams to end when it is asked to stop."""

    on_exit: list[Callable[[], None]] = []

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        for call in self.on_exit:
            call()
        super().handle_exit(sig, frame)


def uvicorn_config(app: object, host: str, port: int) -> uvicorn.Config:
    """uvicorn's options for every serving process (`benchmarks/bare_api.py` serves its baseline
    under them too, so that the two are compared on equal terms)."""
    # No access log: at log level "warning" its lines were never written, but with it on uvicorn
    # still made each request's client address and path for the logger to drop.
    return uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",  # type: ignore[arg-type]
                          timeout_graceful_shutdown=30, loop="none", http="httptools", access_log=False)


def check_host(host: str, *, auth: bool) -> None:
    """Refuse --no-auth off a loopback host (a check that needs no database)."""
    if not auth and not is_loopback(host):
        raise JobdeskError(f"--no-auth is only allowed on a loopback host (127.0.0.1, ::1, localhost), not {host}")


async def _check_tokens(settings: Settings, database: Database) -> None:
    """Refuse to start with auth but no token made."""
    async with await JobService.connect(database, settings=settings, source="api", pool_size=2) as service:
        if not await service.has_tokens():
            raise JobdeskError("no API token exists; create one with `jobdesk token create --name NAME` "
                               "(or start with --no-auth on a loopback host)")


async def connect_service(settings: Settings, *, database: Database | None = None,
                          pool_size: int | None = None) -> JobService:
    """The API's service on `database` (by default the one `settings` choose): its plans are
    kept across calls (planning the group commit each time cost a third more per batch) and kept
    on the indexes, so that none made while `jobs` was small stays a read of the whole table as
    it grows (see `jobdesk.store.db.create_pool`). Its GETs read DATABASE_READ_URL when set."""
    return await JobService.connect(database or Database.resolve(settings), settings=settings, source="api",
                                    pool_size=pool_size, indexes_only=True, read_replica=True)


async def serve(settings: Settings, host: str, port: int, *, auth: bool,
                validate_input: InputValidator = accept_any_input, database: Database | None = None,
                sock: socket.socket | None = None) -> None:
    """Serve `database` (by default the one `settings` choose) on host:port, or on `sock`, a
    listening socket shared with other processes (the start-up checks are then the parent's)."""
    if sock is None:
        check_host(host, auth=auth)
    database = database or Database.resolve(settings)
    if sock is None and auth:
        await _check_tokens(settings, database)
    # Per serving process: a forked one exits without the interpreter's exit handlers, so the
    # spans it batched are exported by the `finally` below.
    end_tracing = otel_setup.configure_from_env("jobdesk-api")
    service = await connect_service(settings, database=database)
    try:
        app = create_app(service, database.dsn, settings=settings, auth=auth, validate_input=validate_input)
        server = _Server(uvicorn_config(app, host, port))
        hub = app.state.ctx.hub
        # Waiters see `stopping` when they wake; woken now, a long-poll or a stream ends at once
        # instead of at its next timeout, and uvicorn's shutdown need not wait for it.
        server.on_exit = [hub.stopping.set, hub.wake_all]
        if sock is None:
            print(f"jobdesk api on http://{host}:{port} ({_where(database)}); docs at /docs", file=sys.stderr)
        # uvicorn raises the captured SIGTERM again after shutting down; a handler of ours turns
        # that into a plain return, so the process exits 0.
        signal.signal(signal.SIGTERM, lambda *_: None)
        await server.serve(sockets=[sock] if sock is not None else None)
    finally:
        await service.close()
        end_tracing()


def _where(database: Database) -> str:
    """The database served, in words, and the read replica its GETs read, if any."""
    reads = f"; GETs read {describe(database.read_url)}" if database.read_url else ""
    return database.describe() + reads


def event_loop_runner() -> asyncio.Runner:
    """The runner of a serving process's event loop: uvloop's where it exists."""
    factory: Callable[[], asyncio.AbstractEventLoop]
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # Windows
        factory = asyncio.new_event_loop
    return asyncio.Runner(loop_factory=factory)


def run(settings: Settings, host: str, port: int, *, auth: bool,
        validate_input: InputValidator = accept_any_input, workers: int = 1) -> int:
    """Serve until stopped: the checks that need no database first, then the database is chosen
    (once, for every process serving) and the token check made."""
    check_host(host, auth=auth)
    database = Database.resolve(settings)
    if workers > 1:
        return _run_workers(settings, database, host, port, auth=auth, validate_input=validate_input,
                            workers=workers)
    with event_loop_runner() as runner:
        runner.run(serve(settings, host, port, auth=auth, validate_input=validate_input, database=database))
    return 0


def _run_workers(settings: Settings, database: Database, host: str, port: int, *, auth: bool,
                 validate_input: InputValidator, workers: int) -> int:
    """`workers` processes on one listening socket, which the kernel hands connections from.
    The API keeps no state of its own, so they need nothing from each other. SIGTERM is passed
    on to each, which finishes its requests in flight; the parent exits 0 once all have."""
    if not hasattr(os, "fork"):
        raise JobdeskError("--workers above 1 needs a platform with fork (not Windows)")
    if auth:
        with event_loop_runner() as runner:  # checked once here, before any process is made
            runner.run(_check_tokens(settings, database))
    sock = uvicorn_config(None, host, port).bind_socket()
    pids: list[int] = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            _serve_child(settings, database, host, port, sock, auth=auth, validate_input=validate_input)
        pids.append(pid)
    sock.close()
    children = _Children(pids)
    signal.signal(signal.SIGTERM, children.stop)
    signal.signal(signal.SIGINT, children.stop)
    print(f"jobdesk api on http://{host}:{port} with {workers} worker processes ({_where(database)}); "
          f"docs at /docs", file=sys.stderr)
    return 1 if children.wait() else 0


def _serve_child(settings: Settings, database: Database, host: str, port: int, sock: socket.socket, *,
                 auth: bool, validate_input: InputValidator) -> NoReturn:
    """The child: serve on the shared socket, and never return into the CLI."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        with event_loop_runner() as runner:
            runner.run(serve(settings, host, port, auth=auth, validate_input=validate_input,
                             database=database, sock=sock))
        code = 0
    except BaseException as exc:  # noqa: BLE001 - a child reports in one line and exits
        print(f"jobdesk api worker {os.getpid()}: {exc}", file=sys.stderr)
    finally:
        sys.stderr.flush()
        os._exit(code)


class _Children:
    """The parent's worker processes: stopped together, waited for together."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.stopping = False

    def stop(self, _sig: int, _frame: FrameType | None) -> None:
        """SIGTERM to each (a signal handler, also called when one child ends on its own)."""
        self.stopping = True
        for child in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)

    def wait(self) -> bool:
        """Until every child has exited; whether one failed or ended on its own."""
        failed = False
        left = set(self.pids)
        while left:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid not in left:
                continue  # not one of ours (the embedded server, say)
            left.discard(pid)
            failed = failed or os.waitstatus_to_exitcode(status) != 0
            if not self.stopping:  # one ended on its own: stop the others rather than serve short-handed
                print(f"jobdesk api: worker process {pid} exited; stopping the others", file=sys.stderr)
                failed = True
                self.stop(signal.SIGTERM, None)
        return failed
