"""The type of a JSON value: what json.loads gives back, and what json.dumps writes without a
`default`. Its containers are read-only (Sequence, Mapping), so that a list[str] or a
dict[str, int] built for an answer is one as it stands."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JsonValue: TypeAlias = "str | int | float | bool | None | Sequence[JsonValue] | Mapping[str, JsonValue]"
JsonObject: TypeAlias = "dict[str, JsonValue]"
