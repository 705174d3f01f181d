"""`jobdesk api` as a real process: start-up checks, SSE over a socket, idempotency across two
processes, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time

import httpx

from tests.helpers import JOBDESK, ROOT, cli_env, free_port, run_cli


def start_api(dsn: str, *args: str, **env: str) -> tuple[subprocess.Popen[str], str]:
    """`jobdesk api ARGS` on a free port of loopback, with these environment variables; returns
    the process and its base URL once /healthz answers."""
    port = free_port()
    proc = subprocess.Popen([*JOBDESK, "api", "--port", str(port), *args], env=cli_env(dsn, **env), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the API did not start")


def stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


async def test_refuses_to_start_without_tokens_or_off_loopback(dsn: str) -> None:
    out = run_cli("api", "--port", str(free_port()), dsn=dsn)
    assert out.returncode == 1 and "jobdesk token create" in out.stderr and len(out.stderr.splitlines()) == 1
    out = run_cli("api", "--no-auth", "--host", "0.0.0.0", dsn=dsn)
    assert out.returncode == 1 and "loopback" in out.stderr and len(out.stderr.splitlines()) == 1


async def test_token_cli(dsn: str) -> None:
    made = run_cli("token", "create", "--name", "ci", "--scope", "read", "--json", dsn=dsn)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["name"] == "ci" and json.loads(made.stdout)["token"].startswith("jdk_")
    plain = run_cli("token", "create", "--name", "web", dsn=dsn)
    assert plain.returncode == 0 and len(plain.stdout.split()) == 1
    listed = json.loads(run_cli("token", "list", "--json", dsn=dsn).stdout)
    assert [(t["name"], t["scopes"]) for t in listed] == [("ci", ["read"]),
                                                          ("web", ["approve", "events", "operate", "read", "submit"])]
    assert run_cli("token", "revoke", "ci", dsn=dsn).returncode == 0
    gone = run_cli("token", "revoke", "ci", dsn=dsn)
    assert gone.returncode == 1 and "no token named" in gone.stderr


async def test_sse_idempotency_across_processes_and_sigterm(dsn: str) -> None:
    token = run_cli("token", "create", "--name", "t", dsn=dsn).stdout.strip()
    one, url1 = start_api(dsn)
    two, url2 = start_api(dsn)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(headers=headers, timeout=10) as client:
            body = {"type": "t", "input_data": {"x": 1}}
            first = await client.post(f"{url1}/api/jobs", json=body, headers={"Idempotency-Key": "same"})
            second = await client.post(f"{url2}/api/jobs", json=body, headers={"Idempotency-Key": "same"})
            assert (first.status_code, second.status_code) == (201, 200)
            assert first.json()["id"] == second.json()["id"]
            job_id = first.json()["id"]

            events: list[tuple[float, dict]] = []

            async def follow() -> None:
                async with client.stream("GET", f"{url2}/api/jobs/{job_id}/events") as resp:
                    assert resp.headers["content-type"].startswith("text/event-stream")
                    async for line in resp.aiter_lines():
                        if line.startswith("data: "):
                            events.append((time.monotonic(), json.loads(line[6:])))

            stream = asyncio.create_task(follow())
            while not events:
                await asyncio.sleep(0.05)
            assert events[0][1]["status"] == "queued"
            out = await asyncio.to_thread(run_cli, "cancel", job_id, dsn=dsn)
            committed_by = time.monotonic()  # the CLI committed before it returned
            assert out.returncode == 0, out.stderr
            await asyncio.wait_for(stream, 5)  # the stream ends after the terminal status
            assert events[-1][1]["status"] == "cancelled" and events[-1][0] - committed_by < 1.0
    finally:
        codes = (stop(one), stop(two))
    assert codes == (0, 0)
