"""`jobdesk api --workers N`: N processes on one port, SIGTERM passed on to each (requests in
flight finish, exit 0), and one that dies takes the others down rather than leave the port short."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx

from jobdesk.embedded.status import alive
from tests.api.test_api_server import free_port, start_api
from tests.helpers import child_pids, run_cli


async def test_workers_share_the_port_and_stop_cleanly_on_sigterm(dsn: str) -> None:
    token = run_cli("token", "create", "--name", "w", dsn=dsn).stdout.strip()
    proc, url = start_api(dsn, "--workers", "2")
    try:
        kids = child_pids(proc.pid)
        assert len(kids) == 2
        headers = {"Authorization": f"Bearer {token}"}
        # No keep-alive: each request on a fresh connection, which the kernel gives either process.
        with httpx.Client(headers=headers, limits=httpx.Limits(max_keepalive_connections=0)) as fresh:
            job = fresh.post(f"{url}/api/jobs", json={"type": "t", "input_data": {}}).json()
            for _ in range(20):
                assert fresh.get(f"{url}/api/jobs/{job['id']}").json()["id"] == job["id"]
        async with httpx.AsyncClient(headers=headers, timeout=20) as client:
            held = asyncio.create_task(client.get(f"{url}/api/jobs/{job['id']}?wait=30"))
            await asyncio.sleep(0.5)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            resp = await held
            assert resp.status_code == 200 and resp.json()["status"] == "queued"
            assert time.monotonic() - started < 2  # woken at once, not at its next timeout
        assert await asyncio.to_thread(proc.wait, 20) == 0
        assert not any(alive(k) for k in kids)
    finally:
        if proc.poll() is None:
            proc.kill()


async def test_a_worker_process_that_dies_stops_the_others(dsn: str) -> None:
    run_cli("token", "create", "--name", "w", dsn=dsn)
    proc, _url = start_api(dsn, "--workers", "2")
    try:
        first, second = child_pids(proc.pid)
        os.kill(first, signal.SIGKILL)
        assert await asyncio.to_thread(proc.wait, 20) == 1
        assert not alive(second)
        out = proc.stdout.read() if proc.stdout else ""
        assert f"worker process {first} exited" in out
    finally:
        if proc.poll() is None:
            proc.kill()


def test_workers_must_be_a_small_positive_number(dsn: str) -> None:
    for bad in ("0", "65"):
        out = run_cli("api", "--port", str(free_port()), "--workers", bad, dsn=dsn)
        assert out.returncode == 2 and "--workers takes a number of processes" in out.stderr
    out = run_cli("api", "--port", str(free_port()), dsn=dsn, JOBDESK_API_WORKERS="0")
    assert out.returncode == 1 and "JOBDESK_API_WORKERS" in out.stderr
    out = run_cli("api", "--port", str(free_port()), "--workers", "2", dsn=dsn)  # no token: refused once
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1 and "jobdesk token create" in out.stderr
