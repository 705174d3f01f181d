"""Writing a generated page, or checking that it is current (`--check`, as `make test` does)."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(page: Path, text: str, argv: list[str]) -> int:
    """Write `text` to `page`; with `--check`, write nothing and exit 1 when the page differs."""
    if "--check" in argv:
        if not page.exists() or page.read_text(encoding="utf-8") != text:
            print(f"{page.name} is out of date: run `make docs`", file=sys.stderr)
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page}")
    return 0
