"""Public names of a package loaded on first use (PEP 562), so that importing the package loads
only what its caller uses."""

from __future__ import annotations

from importlib import import_module  # noqa: TID251 - a package's own table of lazily loaded names
from typing import Any


def load_export(namespace: dict[str, Any], exports: dict[str, str], name: str) -> Any:  # noqa: ANN401
    """The value of `name`, one of the package's `exports` (name -> module), imported now and
    kept in the package's `namespace`; AttributeError for any other name, as for a plain module."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    namespace[name] = value
    return value
