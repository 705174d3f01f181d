"""Additions to the OpenAPI document FastAPI writes, for what the hot routes read by hand.

The hot routes read their token and body themselves, as FastAPI's solving of declared ones
cost a share of their time. A decorator marks each such endpoint (`marked`), and a step run on
the generated document (`amend`) writes for it what FastAPI writes for the declared ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from fastapi import FastAPI
from fastapi.routing import APIRoute

F = TypeVar("F", bound=Callable[..., object])


def marked(attribute: str, value: object) -> Callable[[F], F]:
    """A decorator that sets `attribute` to `value` on an endpoint, for a step of `amend`."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, attribute, value)
        return endpoint

    return mark


def operations(app: FastAPI, schema: dict[str, Any]) -> Iterator[tuple[APIRoute, dict[str, Any]]]:
    """Each of the app's routes, with each of its operations in the document."""
    for route in app.routes:
        if isinstance(route, APIRoute):
            for method in route.methods or ():
                operation = schema["paths"].get(route.path_format, {}).get(method.lower())
                if operation is not None:
                    yield route, operation


def amend(app: FastAPI, step: Callable[[dict[str, Any]], None]) -> None:
    """Run `step` on the document FastAPI generates for `app`, once: the result is kept."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        step(schema)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
