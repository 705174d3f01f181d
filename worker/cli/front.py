"""The command line's front: the top of its parser, and `jobdesk --version` and `jobdesk --help`
answered before any command group is imported (no pydantic, no asyncio, no asyncpg).

`--help` lists every command with its one-line help. The full parser gets them from each group's
module, which imports what its commands run; here they come from `help_index`, written from the full
parser by `python -m jobdesk.cli.front --write`. The index records a checksum of the modules its
text came from: when one of them has changed since (or cannot be read, as in a frozen bundle), the
full parser answers instead, so the text printed is always the full parser's.
"""

from __future__ import annotations

import argparse
import os
import sys
import zlib
from collections.abc import Iterable, Sequence

from jobdesk.cli.arguments import ArgumentParser, Subparsers
from jobdesk.core.version import __version__

HERE = os.path.dirname(os.path.abspath(__file__))
INDEX = os.path.join(HERE, "help_index.py")
# A command's name, its aliases and its one-line help, as the full parser lists them.
Listed = tuple[str, tuple[str, ...], str]


def top_parser() -> tuple[ArgumentParser, Subparsers]:
    """The parser of `jobdesk` with no command added yet, and the action the commands are added to."""
    parser = ArgumentParser(prog="jobdesk", description="A job system on PostgreSQL.")
    parser.add_argument("--version", action="version", version=f"jobdesk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    return parser, sub


def sources_checksum(groups: Iterable[str]) -> int | None:
    """A checksum of the modules the command list's text comes from; None when one is unreadable."""
    checksum = 0
    try:
        for name in ("front", "arguments", "main", *sorted(set(groups))):
            with open(os.path.join(HERE, f"{name}.py"), "rb") as source:
                checksum = zlib.crc32(source.read(), checksum)
    except OSError:
        return None
    return checksum


def listed_commands(parser: argparse.ArgumentParser) -> list[Listed]:
    """What `parser --help` lists of its commands, in order."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    listed = []
    for action in sub._get_subactions():
        aliases = str(action.metavar)[len(action.dest) + 2:-1].split(", ") if action.metavar != action.dest else []
        listed.append((action.dest, tuple(aliases), str(action.help)))
    return listed


def quick_help_parser() -> ArgumentParser | None:
    """A parser whose `--help` prints the full parser's text, built from the index; None when the
    index is not known to match the modules it was written from."""
    from jobdesk.cli import help_index
    from jobdesk.cli.main import GROUPS

    if help_index.CHECKSUM is None or help_index.CHECKSUM != sources_checksum(GROUPS):
        return None
    parser, sub = top_parser()
    for name, aliases, help_text in help_index.COMMANDS:
        sub.add_parser(name, aliases=aliases, help=help_text, add_help=False)
    return parser


def answer_at_once(argv: Sequence[str]) -> None:
    """Print the version or the help and exit (SystemExit, as argparse does) when `argv` asks for
    nothing else; otherwise return, having imported nothing heavy."""
    if list(argv) == ["--version"]:
        top_parser()[0].parse_args(argv)
    elif list(argv) in (["--help"], ["-h"]):
        parser = quick_help_parser()
        if parser is not None:
            parser.parse_args(argv)


def index_text() -> str:
    """The source of `help_index`, written from the full parser."""
    from jobdesk.cli.main import GROUPS, build_parser

    rows = "".join(f"    {entry!r},\n" for entry in listed_commands(build_parser()))
    return (f'"""What `jobdesk --help` lists: written by `python -m jobdesk.cli.front --write` from the full\n'
            f'parser (do not edit by hand). CHECKSUM is that of the modules the text came from."""\n\n'
            f"CHECKSUM: int | None = {sources_checksum(GROUPS)}\n"
            f"COMMANDS: tuple[tuple[str, tuple[str, ...], str], ...] = (\n{rows})\n")


def main(argv: Sequence[str] | None = None) -> int:
    """`--write` rewrites the index; `--check` fails when it is out of date."""
    from jobdesk.core.generated import write_or_check

    return write_or_check(INDEX, index_text(), "jobdesk.cli.front", sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
