"""The settings read without importing pydantic, when that gives exactly what pydantic-settings
would: the commands and the worker then start without loading pydantic-settings (and, for the
commands that read jobs, without pydantic at all).

`Settings` (jobdesk.core.settings) stays the one definition of the settings, of their defaults and
of their errors. `settings_index` holds, for each field, its default and how a value set in the
environment is read, written from `Settings` by `python -m jobdesk.core.plain_settings --write`
with a checksum of its module. The plain read is taken only when every value set can be read
without doubt: no `.env` file, each set variable a plain string, or a plain decimal number within
the field's bounds, or `true`/`false`/`1`/`0` for a flag; and an index that matches `Settings`.
Anything else (a list, a duration, a field with its own validator, an unusual spelling, a value
out of bounds, overrides) goes to pydantic-settings, which validates it and words any error as
always. Both ways give the same values (tests/core/test_plain_settings.py).
"""

from __future__ import annotations

import copy
import os
import re
import sys
import zlib
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

SETTINGS_MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "settings.py")
INDEX_MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "settings_index.py")
ENV_FILE = ".env"  # Settings.model_config's env_file, relative to the working folder
_INT = re.compile(r"[0-9]{1,15}")
_FLOAT = re.compile(r"[0-9]{1,15}(\.[0-9]{1,15})?")
_FLAGS = {"true": True, "false": False, "1": True, "0": False}
# How an environment value of each kind of field is read; None: not without pydantic.
Bounds = tuple[float | None, float | None, float | None, float | None]  # gt, ge, lt, le


class PlainSettings:
    """The settings as `Settings` would hold them, read without pydantic. Attributes are the
    fields; anything else `Settings` has (its methods) comes from a `Settings` of the same values."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 (called only for what is not a field)
        if name.startswith("__"):
            raise AttributeError(name)
        from jobdesk.core.settings import Settings

        return getattr(Settings.model_construct(**self.__dict__), name)

    def __repr__(self) -> str:
        return f"PlainSettings({self.__dict__!r})"


def _within(value: float, bounds: Bounds) -> bool:
    gt, ge, lt, le = bounds
    return ((gt is None or value > gt) and (ge is None or value >= ge)
            and (lt is None or value < lt) and (le is None or value <= le))


def read_value(kind: str, bounds: Bounds, text: str) -> tuple[bool, Any]:
    """(True, value) when `text` reads without doubt as `Settings` would read it; else (False, None)."""
    if kind in ("str", "str?"):
        return True, text
    if kind == "bool":
        return (True, _FLAGS[text]) if text in _FLAGS else (False, None)
    if kind in ("int", "int?") and _INT.fullmatch(text) and _within(int(text), bounds):
        return True, int(text)
    if kind in ("float", "float?") and _FLOAT.fullmatch(text) and _within(float(text), bounds):
        return True, float(text)
    return False, None


def _index_current() -> bool:
    from jobdesk.core import settings_index

    try:
        with open(SETTINGS_MODULE, "rb") as source:
            return settings_index.CHECKSUM == zlib.crc32(source.read())
    except OSError:
        return False


def read_plain() -> PlainSettings | None:
    """The settings read without pydantic, or None when pydantic-settings must read them."""
    if os.path.exists(ENV_FILE) or not _index_current():
        return None
    from jobdesk.core.settings_index import FIELDS

    values = {}
    for name, (default, kind, bounds) in FIELDS.items():
        text = os.environ.get(name)
        if text is None:
            values[name] = copy.deepcopy(default)
            continue
        ok, value = read_value(kind, bounds, text)
        if not ok:
            return None
        values[name] = value
    return PlainSettings(values)


def load_settings(**overrides: object) -> Settings:
    """`jobdesk.core.settings.load_settings`: the same values and errors, read without pydantic
    when that is certain to give the same."""
    plain = None if overrides else read_plain()
    if plain is not None:
        return cast("Settings", plain)
    from jobdesk.core.settings import load_settings as validated

    return validated(**overrides)


# -- the index, written from Settings ---------------------------------------------------------------

def field_kind(annotation: object, metadata: list[object], validated: bool) -> tuple[str, Bounds]:
    """How a field's environment value is read without pydantic ("other": it is not)."""
    import annotated_types

    bounds: list[float | None] = [None, None, None, None]
    for item in metadata:
        if type(item) not in (annotated_types.Gt, annotated_types.Ge, annotated_types.Lt, annotated_types.Le):
            return "other", (None, None, None, None)
        slot = ("gt", "ge", "lt", "le").index(type(item).__name__.lower())
        bounds[slot] = getattr(item, type(item).__name__.lower())
    kinds = {str: "str", int: "int", float: "float", bool: "bool",
             str | None: "str?", int | None: "int?", float | None: "float?"}
    kind = "other" if validated else kinds.get(annotation, "other")  # type: ignore[call-overload]
    if kind in ("str", "str?", "bool") and any(b is not None for b in bounds):
        kind = "other"
    return kind, (bounds[0], bounds[1], bounds[2], bounds[3])


def index_text() -> str:
    """The source of `settings_index`, written from `Settings`."""
    from jobdesk.core.settings import Settings

    validated = {f for d in Settings.__pydantic_decorators__.field_validators.values() for f in d.info.fields}
    saved = {name: os.environ.pop(name) for name in Settings.model_fields if name in os.environ}
    try:  # the defaults as Settings holds them (it validates them): read from no environment
        defaults = Settings(_env_file=None)  # type: ignore[call-arg]
    finally:
        os.environ.update(saved)
    rows = []
    for name, field in Settings.model_fields.items():
        kind, bounds = field_kind(field.annotation, field.metadata, name in validated)
        rows.append(f"    {name!r}: ({getattr(defaults, name)!r}, {kind!r}, {bounds!r}),\n")
    with open(SETTINGS_MODULE, "rb") as source:
        checksum = zlib.crc32(source.read())
    return ('"""Each setting\'s default and how its environment value is read without pydantic: written from\n'
            '`Settings` by `python -m jobdesk.core.plain_settings --write` (do not edit by hand)."""\n\n'
            "from typing import Any\n\n"
            f"CHECKSUM = {checksum}\n"
            "FIELDS: dict[str, tuple[Any, str, tuple[float | None, float | None, float | None, float | None]]] = {\n"
            f"{''.join(rows)}}}\n")


def main(argv: list[str]) -> int:
    """`--write` rewrites the index; `--check` fails when it is out of date."""
    from jobdesk.core.generated import write_or_check

    return write_or_check(INDEX_MODULE, index_text(), "jobdesk.core.plain_settings", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
