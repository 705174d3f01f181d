"""Modules written from the code they index (the command line's help index, the settings'
index): one command-line door for each, that rewrites the module or checks it is up to date."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def write_or_check(path: str, text: str, module: str, argv: Sequence[str]) -> int:
    """`--write` rewrites `path` with `text`; `--check` fails (exit 1) when it differs, naming
    the command (`python -m MODULE --write`) that brings it up to date."""
    if list(argv) == ["--write"]:
        with open(path, "w", encoding="utf-8") as index:
            index.write(text)
        return 0
    if list(argv) == ["--check"]:
        with open(path, encoding="utf-8") as index:
            if index.read() == text:
                return 0
        print(f"{path} is out of date: run `python -m {module} --write`", file=sys.stderr)
        return 1
    print(f"usage: python -m {module} --write | --check", file=sys.stderr)
    return 2
