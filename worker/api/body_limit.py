"""Requests whose body is over JOBDESK_API_MAX_BODY get 413 with the usual error body, whether
they announce their length or stream it."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_BODY = json.dumps({"error": {"code": "payload_too_large", "message": "the request body is too large"}}).encode()


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body:
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(_BODY)).encode()), (b"connection", b"close")]})
                await send({"type": "http.response.body", "body": _BODY})
                return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    # An HTTPException, as FastAPI lets it through from reading a declared body
                    # (any other error there becomes its 400 "error parsing the body").
                    raise HTTPException(413, "the request body is too large")
            return message

        await self.app(scope, counted, send)
