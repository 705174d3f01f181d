"""Requests whose body is over JOBDESK_API_MAX_BODY get 413 with the usual error body, whether
they announce their length or stream it.

The answer must reach a client that sends its whole body before it reads. A server that answers
and closes while body bytes are still arriving makes the kernel reset the connection, and the
client sees `ConnectionResetError` or `BrokenPipeError`, never the 413. So the rest of the body
is read and thrown away first, up to DRAIN_LIMIT bytes; the connection is then kept open (the
client may send its next request on it). Only a body longer than that bound is answered with
`connection: close` straight away, and such a client may see a reset.
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_BODY = json.dumps({"error": {"code": "payload_too_large", "message": "the request body is too large"}}).encode()

# How many bytes of a refused body are read and discarded so that the client gets its answer.
DRAIN_LIMIT = 256 * 1024 * 1024


async def drain(receive: Receive, limit: int = DRAIN_LIMIT) -> bool:
    """Read and discard the rest of a request body, up to `limit` bytes; whether it ended
    (False: longer than that, or the client went away)."""
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return False
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return True
        if seen > limit:
            return False


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body: int, drain_limit: int = DRAIN_LIMIT) -> None:
        self.app = app
        self.max_body = max_body
        self.drain_limit = drain_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body:
                await self._refuse(send, drained=int(value) <= self.drain_limit and await drain(receive))
                return
        seen = 0
        ended = False

        async def counted() -> Message:
            nonlocal seen, ended
            if ended:  # the body was drained after its limit was passed: nothing more comes
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    ended = True
                    if message.get("more_body", False):
                        await drain(receive, self.drain_limit)
                    # An HTTPException, as FastAPI lets it through from reading a declared body
                    # (any other error there becomes its 400 "error parsing the body").
                    raise HTTPException(413, "the request body is too large")
            return message

        await self.app(scope, counted, send)

    @staticmethod
    async def _refuse(send: Send, *, drained: bool) -> None:
        """The 413; the connection closed after it only when the body could not be read to its end."""
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(_BODY)).encode())]
        if not drained:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": _BODY})
