"""A bare FastAPI app that answers constants: the baseline `api_bench.py` measures `jobdesk api` against.

    .venv/bin/python benchmarks/bare_api.py --port PORT [--workers N]

It is served as `jobdesk api` is served: the same uvicorn options and event loop
(`jobdesk.api.server.uvicorn_config` and `event_loop_runner`), and with `--workers` above 1 as
many processes forked onto one listening socket. Its two routes are what a plain FastAPI app
would write, with nothing behind them:
  - GET /const: a constant job document;
  - POST /const: reads and validates a JSON body shaped like `POST /api/jobs`'s (`type`,
    `input_data`) and answers 201 with that same constant.
The constant is a job as `GET /api/jobs/{id}` answers it, so that both write as many bytes.
SIGTERM stops it (every process) and it exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from typing import Any

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

from jobdesk.api.server import event_loop_runner, uvicorn_config

JOB: dict[str, Any] = {
    "id": "0b9f3a4e-5d6c-4f7a-8b9c-0d1e2f3a4b5c", "type": "noop", "status": "completed", "user_id": None,
    "pipeline_id": None, "input_data": {}, "result_data": None, "error_message": None, "dependent_on_jobs": [],
    "retry_count": 0, "next_retry_at": None, "is_active": False, "created_at": "2026-12-06T08:00:00.123456+00:00",
    "updated_at": "2026-12-06T08:00:00.234567+00:00", "completed_at": "2026-12-06T08:00:00.234567+00:00",
    "priority": 0, "worker_id": "bench-host-12345", "started_at": "2026-12-06T08:00:00.134567+00:00",
    "scheduled_at": None, "unique_key": None,
    "attempts": [{"attempt": 1, "worker_id": "bench-host-12345", "started_at": "2026-12-06T08:00:00.134567+00:00",
                  "finished_at": "2026-12-06T08:00:00.234567+00:00", "outcome": "completed",
                  "error_message": None, "traceback": None}],
    "steps": [], "progress": None, "waiting_reason": None,
}


class JobBody(BaseModel):
    type: str
    input_data: dict[str, Any] = {}


app = FastAPI()


@app.get("/const")
async def const_get() -> dict[str, Any]:
    return JOB


@app.post("/const", status_code=201)
async def const_post(body: JobBody) -> dict[str, Any]:
    return JOB


def serve(host: str, port: int, sock: object | None = None) -> None:
    server = uvicorn.Server(uvicorn_config(app, host, port))
    signal.signal(signal.SIGTERM, lambda *_: None)  # after uvicorn's shutdown: exit 0, as `jobdesk api`
    with event_loop_runner() as runner:
        runner.run(server.serve(sockets=[sock] if sock is not None else None))  # type: ignore[list-item]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers == 1:
        serve(args.host, args.port)
        return 0
    sock = uvicorn_config(None, args.host, args.port).bind_socket()
    pids = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                serve(args.host, args.port, sock)
            except BaseException:  # noqa: BLE001 - the child must not return into the parent's code
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    sock.close()

    def stop(*_: object) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = False
    for pid in pids:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        failed = failed or os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
