"""`jobdesk --version` and `jobdesk --help` answered before anything heavy is imported: the same
text as the full parser's, and which modules they load (never how long they take); and what the
commands that read jobs load."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from jobdesk.cli import front, help_index
from jobdesk.cli import main as cli_main
from tests.helpers import ROOT

# Runs `jobdesk ARGS` as the console script does, then prints what it printed and the modules loaded.
LAUNCH = """
import contextlib, io, json, sys
from jobdesk.console.launcher import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""
HEAVY = ("pydantic", "pydantic_core", "pydantic_settings", "asyncpg", "asyncio", "psycopg")


def launch(*args: str, columns: int = 80, dsn: str | None = None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOB", "DATABASE_", "DB_", "PYDANTIC_"))}
    env.update(COLUMNS=str(columns), **({"DATABASE_URL": dsn} if dsn else {}))
    done = subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True, check=True,
                          cwd=ROOT, env=env)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def full_parser_output(args: list[str], columns: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """What the parser with every command group loaded prints for `args`."""
    monkeypatch.setenv("COLUMNS", str(columns))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        cli_main.build_parser().parse_args(args)
    assert exited.value.code == 0
    return out.getvalue()


def test_the_help_index_is_up_to_date() -> None:
    assert front.index_text() == (ROOT / "worker" / "cli" / "help_index.py").read_text(), (
        "worker/cli/help_index.py is out of date: run `python -m jobdesk.cli.front --write`")
    assert front.quick_help_parser() is not None


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["-h"]])
@pytest.mark.parametrize("columns", [60, 80, 200])
def test_version_and_help_print_the_full_parsers_text(args: list[str], columns: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    got = launch(*args, columns=columns)
    assert got["code"] == 0
    assert got["out"] == full_parser_output(args, columns, monkeypatch)


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_load_no_command_group_nor_pydantic_nor_asyncpg(args: list[str]) -> None:
    modules = set(launch(*args)["modules"])  # type: ignore[call-overload]
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert not {m for m in modules if m.startswith(HEAVY)}
    groups = {f"jobdesk.cli.{group}" for group in cli_main.GROUPS}
    assert not modules & groups
    assert "jobdesk.core.settings" not in modules and "jobdesk.core.models" not in modules


def test_a_command_still_loads_its_group() -> None:
    got = launch("jobs", "--help")
    assert got["code"] == 0
    assert "jobdesk.cli.jobs" in got["modules"]  # type: ignore[operator]


async def test_jobs_and_show_on_database_url_load_neither_pydantic_nor_pydantic_settings(dsn: str) -> None:
    created = launch("submit", "noop", "--json", dsn=dsn)
    assert created["code"] == 0
    job_id = json.loads(str(created["out"]))["id"]
    for args in (("jobs", "--limit", "20"), ("show", job_id)):
        got = launch(*args, dsn=dsn)
        assert got["code"] == 0 and job_id[-8:] in str(got["out"])
        modules = set(got["modules"])  # type: ignore[call-overload]
        assert not {m for m in modules if m.startswith(("pydantic", "annotated_types"))}, args
        assert "jobdesk.core.settings" not in modules


def test_a_stale_index_gives_way_to_the_full_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = full_parser_output(["--help"], 80, monkeypatch)
    monkeypatch.setattr(help_index, "CHECKSUM", (help_index.CHECKSUM or 0) + 1)
    monkeypatch.setattr(help_index, "COMMANDS", help_index.COMMANDS[:1])
    assert front.quick_help_parser() is None
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli_main.main(["--help"])
    assert out.getvalue() == expected


def test_an_unreadable_module_gives_way_to_the_full_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(front, "HERE", str(ROOT / "no-such-folder"))
    assert front.sources_checksum(cli_main.GROUPS) is None
    assert front.quick_help_parser() is None


def test_a_command_skips_pydantics_plugin_scan_unless_the_user_set_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        cli_main.main(["no-such-command"])
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "")  # the user's choice: every plugin
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        cli_main.main(["no-such-command"])
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == ""
