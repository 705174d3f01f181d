"""What every command group prints with: JSON for scripts, aligned columns, times relative to now."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from jobdesk.core.timefmt import relative


def ago(when: datetime | None) -> str:
    return relative(when) or "-"


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters; one that was longer ends with `…`, so that a reader
    knows there is more (`--json` prints it whole). Only its first line is kept: a value of
    several lines is cut there too."""
    first, _, rest = text.partition("\n")
    if len(first) <= width and not rest:
        return first
    return first[:width - 1] + "…" if len(first) >= width else first + "…"


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2, default=str))


def print_rows(rows: Sequence[Sequence[str]]) -> None:
    """Aligned columns; the first row is the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
