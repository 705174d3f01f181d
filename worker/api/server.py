"""`jobdesk api`: checks, then the app under uvicorn. SIGTERM lets requests in flight finish,
ends SSE streams and long-polls, and exits 0."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import sys
from collections.abc import Callable
from types import FrameType

import uvicorn

from worker.api.app import InputValidator, accept_any_input, create_app
from worker.db import resolve_target
from worker.errors import JobdeskError
from worker.service import JobService
from worker.settings import Settings


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(uvicorn.Server):
    """uvicorn's server, which also tells waiting streams to end when it is asked to stop."""

    on_exit: list[asyncio.Event] = []

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        for event in self.on_exit:
            event.set()
        super().handle_exit(sig, frame)


async def serve(settings: Settings, host: str, port: int, *, auth: bool,
                validate_input: InputValidator = accept_any_input) -> None:
    if not auth and not is_loopback(host):
        raise JobdeskError(f"--no-auth is only allowed on a loopback host (127.0.0.1, ::1, localhost), not {host}")
    target = resolve_target(settings)
    service = await JobService.connect(target.dsn if not target.embedded else None, settings=settings,
                                       source="api")
    try:
        if auth and not await service.has_tokens():
            raise JobdeskError("no API token exists; create one with `jobdesk token create --name NAME` "
                               "(or start with --no-auth on a loopback host)")
        app = create_app(service, target.dsn, settings=settings, auth=auth, validate_input=validate_input)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=30, loop="none", http="httptools")
        server = _Server(config)
        server.on_exit = [app.state.ctx.hub.stopping]
        print(f"jobdesk api on http://{host}:{port} ({target.describe()}); docs at /docs", file=sys.stderr)
        # uvicorn raises the captured SIGTERM again after shutting down; a handler of ours turns
        # that into a plain return, so the process exits 0.
        signal.signal(signal.SIGTERM, lambda *_: None)
        await server.serve()
    finally:
        await service.close()


def run(settings: Settings, host: str, port: int, *, auth: bool,
        validate_input: InputValidator = accept_any_input) -> int:
    factory: Callable[[], asyncio.AbstractEventLoop]
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # Windows
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(settings, host, port, auth=auth, validate_input=validate_input))
    return 0
