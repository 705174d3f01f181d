"""The command line's parsing: an argparse parser whose usage errors are one line, the exit codes,
and the argument types more than one command group takes."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

if TYPE_CHECKING:
    from jobdesk.core.models import Status

EXIT_ERROR = 1
EXIT_USAGE = 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, not the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"jobdesk: error: {message} (see `{self.prog} --help`)\n")


# What `add_subparsers` gives: each command group adds its commands' parsers to it.
Subparsers: TypeAlias = "argparse._SubParsersAction[ArgumentParser]"


def json_arg(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--input is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--input must be a JSON object, like '{\"key\": 1}'")
    return value


def search_arg(text: str) -> str:
    """A search query (`jobdesk.store.search_syntax`), refused whole if any term is bad."""
    from jobdesk.store.search_syntax import parse_search

    errors = parse_search(text).errors
    if errors:
        raise argparse.ArgumentTypeError(f"--search: {'; '.join(errors)}")
    return text


def status_arg(text: str) -> Status:
    from jobdesk.core.models import Status  # loaded by the commands that take a status

    try:
        return Status(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown status {text!r}; use one of {', '.join(s.value for s in Status)}") from None
