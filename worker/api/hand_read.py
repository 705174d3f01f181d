"""A hot route's JSON body, read by hand as FastAPI reads a declared one.

FastAPI solves a route's declared parameters on every request: for `POST /api/jobs` that was
about a fifth of the route's time. `raw_json` and `validate_body` read the body in the same
steps, with the same errors (a 422 naming `body[pos]` for malformed JSON, `body.field` for a
field, and a 400 for a body that cannot be read); `documented_body` and `document_bodies` keep
the route's request body in the OpenAPI document as FastAPI writes it for a declared one.
"""

from __future__ import annotations

import email.message
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from jobdesk.api.auth import raw_header
from jobdesk.api.openapi_doc import F, amend, marked, operations

M = TypeVar("M", bound=BaseModel)
_MISSING = object()
_REF = re.compile(r'"#/components/schemas/([^"]+)"')


def _is_json(content_type: bytes | None) -> bool:
    """FastAPI's test: a body is JSON when its content type is application/json or
    application/*+json; without a content type it is not."""
    if content_type is None:
        return False
    if content_type == b"application/json":
        return True
    message = email.message.Message()
    message["content-type"] = content_type.decode("latin-1")
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


async def _body(request: Request) -> bytes:
    """`request.body()`, read straight from the server's messages: Starlette's reads them
    through an async generator, a share of the enqueue route's time. A body read here is kept
    on the request (`_body`), where Starlette's own readers find it."""
    if hasattr(request, "_body"):
        return request._body  # type: ignore[no-any-return]
    receive = request.receive
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()
    request._body = body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    request._stream_consumed = True
    return body


async def raw_json(request: Request) -> object:
    """The body, decoded when it is JSON (else its bytes; `_MISSING` when empty). Call it first:
    FastAPI reads the body before it solves the route's dependencies (authorization)."""
    raw = await _body(request)
    if not raw:
        return _MISSING
    if not _is_json(raw_header(request, b"content-type")):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                                       "input": {}, "ctx": {"error": exc.msg}}], body=exc.doc) from None
    except ValueError:  # not UTF-8, -16 or -32
        raise HTTPException(400, "There was an error parsing the body") from None


def validate_body(body: object, model: type[M]) -> M:
    """`raw_json`'s result as `model`, or the 422 FastAPI gives."""
    if body is _MISSING:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    try:
        return model.model_validate(body, from_attributes=True)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def documented_body(model: type[BaseModel]) -> Callable[[F], F]:
    """Mark an endpoint that reads a body of `model` itself, for `document_bodies`."""
    return marked("jobdesk_body", model)


def _declared_schemas(model: type[BaseModel]) -> dict[str, Any]:
    """The components FastAPI writes for a body of `model`: asked of FastAPI itself, through
    an endpoint that declares it and never serves."""

    async def declared(body: object) -> None:
        """Only read for its annotation."""

    declared.__annotations__ = {"body": model, "return": None}
    spec = get_openapi(title="", version="", routes=[APIRoute("/", declared, methods=["POST"])])
    every = spec["components"]["schemas"]
    wanted: dict[str, Any] = {}
    todo = [model.__name__]
    while todo:  # the model's schema and those it refers to; not the 422 schemas of the route
        name = todo.pop()
        if name not in wanted:
            wanted[name] = every[name]
            todo += _REF.findall(json.dumps(every[name]))
    return wanted


def document_bodies(app: FastAPI) -> None:
    """The request body of every marked route in the OpenAPI document: required, JSON, with its
    model among the components, as FastAPI writes a declared body."""

    def declare(schema: dict[str, Any]) -> None:
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for route, operation in operations(app, schema):
            model = getattr(route.endpoint, "jobdesk_body", None)
            if model is None:
                continue
            for name, part in _declared_schemas(model).items():
                components.setdefault(name, part)
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}

    amend(app, declare)
