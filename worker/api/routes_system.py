"""/healthz, /metrics and /api/ping (a constant: the framework's ceiling in the benchmark)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from jobdesk.api.errors import unavailable
from jobdesk.api.schemas import ErrorOut, Health, Ping

log = logging.getLogger("jobdesk.api")
router = APIRouter(tags=["system"])
_PONG = b'{"pong":true}'


@router.get("/healthz", response_model=Health, responses={503: {"model": ErrorOut}})
async def healthz(request: Request) -> Response:
    """200 when the database answers, 503 otherwise."""
    try:
        async with asyncio.timeout(3):
            await request.app.state.ctx.service.ping()
    except Exception as exc:  # noqa: BLE001 - any failure is the 503 the probe asks about; logged
        log.warning("healthz: the database did not answer: %s", str(exc).strip() or type(exc).__name__)
        return unavailable()
    return Response(b'{"status":"ok"}', media_type="application/json")


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def metrics(request: Request) -> Response:
    ctx = request.app.state.ctx
    return Response(await ctx.metrics.render(ctx.service), media_type=CONTENT_TYPE_LATEST)


@router.get("/api/ping", response_model=Ping)
async def ping() -> Response:
    """A constant answer that touches no database: what the framework alone costs."""
    return Response(_PONG, media_type="application/json")
