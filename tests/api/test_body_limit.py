"""A body over JOBDESK_API_MAX_BODY reaches a real client as 413 with the JSON error body, on
`jobdesk api` (uvicorn on loopback): also for a client that sends its whole body before it
reads, which sees a reset instead when the server answers and closes too early."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

from tests.api.test_api_server import start_api, stop

MiB = 1024 * 1024


@pytest.fixture
def api_url(dsn: str) -> object:
    proc, url = start_api(dsn, "--no-auth", JOBDESK_API_MAX_BODY=str(64 * 1024))
    yield httpx.URL(url).port
    assert stop(proc) == 0


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one HTTP answer read from `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before the answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "connection closed in the middle of the answer"
        body += chunk
    return int(lines[0].split()[1]), headers, body


def send_then_read(port: int, body: bytes, *, chunked: bool = False) -> tuple[int, dict[str, str], bytes]:
    """POST /api/jobs as a naive client does: the whole request first, then read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        framing = b"transfer-encoding: chunked" if chunked else b"content-length: %d" % len(body)
        sock.sendall(b"POST /api/jobs HTTP/1.1\r\nhost: api\r\ncontent-type: application/json\r\n"
                     + framing + b"\r\n\r\n")
        if chunked:
            step = MiB
            for at in range(0, len(body), step):
                piece = body[at:at + step]
                sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        else:
            sock.sendall(body)
        answer = _read_answer(sock)
        # The connection is still good for the next request.
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: api\r\n\r\n")
        assert _read_answer(sock)[0] == 200
        return answer


def _big_body(size: int) -> bytes:
    pad = size - len('{"type": "echo", "input_data": {"pad": ""}}')
    return json.dumps({"type": "echo", "input_data": {"pad": "x" * pad}}).encode()


@pytest.mark.parametrize("size", [4 * MiB, 64 * MiB])
async def test_413_reaches_a_client_that_sends_everything_first(api_url: int, size: int) -> None:
    status, headers, body = await asyncio.to_thread(send_then_read, api_url, _big_body(size))
    assert status == 413 and headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "payload_too_large"


async def test_413_for_a_streamed_body(api_url: int) -> None:
    status, _, body = await asyncio.to_thread(send_then_read, api_url, _big_body(4 * MiB), chunked=True)
    assert status == 413 and json.loads(body)["error"]["code"] == "payload_too_large"


async def test_413_to_httpx_every_time(api_url: int) -> None:
    big = _big_body(4 * MiB)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_url}", timeout=60) as client:
        for _ in range(7):
            answer = await client.post("/api/jobs", content=big, headers={"content-type": "application/json"})
            assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"
