"""What a command loads: `jobdesk worker` loads its own command group, not the others, nor the
service layer the other commands act through; `import jobdesk` loads the public names on first use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from jobdesk.cli import main as cli_main
from tests.helpers import ROOT

LOADED = ("import json, sys; {setup}; "
          "print(json.dumps(sorted(m for m in sys.modules if m.startswith('jobdesk'))))")


def loaded_after(setup: str) -> set[str]:
    """The jobdesk modules a fresh interpreter holds after running `setup`."""
    out = subprocess.run([sys.executable, "-c", LOADED.format(setup=setup)], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    return set(json.loads(out))


def test_groups_name_every_command_of_their_modules() -> None:
    for group, commands in cli_main.GROUPS.items():
        assert tuple(cli_main.group_module(group).COMMANDS) == commands, group


@pytest.mark.parametrize("command", sorted(cli_main.GROUP_OF))
def test_a_commands_own_parser_parses_and_words_help_as_the_whole_one(command: str) -> None:
    whole = cli_main.build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    own = cli_main.build_parser(command)._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert command in own
    assert own[command].format_help() == whole.format_help()
    assert set(own) < set(cli_main.build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def test_worker_command_loads_neither_other_groups_nor_the_service_for_reads() -> None:
    loaded = loaded_after("from jobdesk.cli.main import build_parser, group_module; "
                          "build_parser('worker').parse_args(['worker']); group_module('workers')")
    assert "jobdesk.cli.workers" in loaded
    others = {f"jobdesk.cli.{g}" for g in cli_main.GROUPS} - {"jobdesk.cli.workers"}
    assert not loaded & others
    assert not loaded & {"jobdesk.service.jobs", "jobdesk.service.client", "jobdesk.service.job_reads",
                         "jobdesk.api.app"}


def test_import_jobdesk_loads_the_public_names_on_first_use() -> None:
    assert loaded_after("import jobdesk") <= {"jobdesk", "jobdesk.core", "jobdesk.core.version"}
    assert "jobdesk.service.client" in loaded_after("from jobdesk import JobClient")
    import jobdesk

    assert set(jobdesk.__all__) <= set(dir(jobdesk))
    for name in jobdesk.__all__:
        assert getattr(jobdesk, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        jobdesk.Nothing  # noqa: B018
    failed = subprocess.run([sys.executable, "-c", "from jobdesk import Nothing"], capture_output=True, text=True,
                            cwd=ROOT)
    assert failed.returncode == 1
    assert "ImportError: cannot import name 'Nothing' from 'jobdesk'" in failed.stderr


def test_service_package_loads_its_names_on_first_use() -> None:
    assert "jobdesk.service.jobs" not in loaded_after("import jobdesk.service.schema")
    import jobdesk.service as service
    from jobdesk.service.jobs import JobService

    assert service.JobService is JobService
    assert set(service.__all__) <= set(dir(service))


def test_a_worker_reaches_its_first_claim_without_pydantic_or_the_package_metadata() -> None:
    """What `jobdesk worker` loads before its first claim (its command, the engine, the built-in
    processors) leaves out pydantic, which the processors' input models need only at the first
    job, and importlib.metadata, which is asked only when a distribution declares a plugin."""
    heavy = ("import json, sys; from jobdesk.cli.main import build_parser, group_module; "
             "build_parser('worker').parse_args(['worker']); group_module('workers'); import jobdesk.runtime.worker; "
             "from jobdesk.runtime.registry import instantiate, load_processor_classes; "
             "made = instantiate(load_processor_classes()); assert 'noop' in made; "
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('pydantic', 'pydantic_core', 'pydantic_settings') or m == 'importlib.metadata')))")
    out = subprocess.run([sys.executable, "-c", heavy], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert json.loads(out) == []


def test_the_builtin_input_models_load_at_their_first_use() -> None:
    from jobdesk.processors import models
    from jobdesk.processors.builtin import NoopProcessor, SleepProcessor

    assert SleepProcessor.input_model is models.SleepInput
    assert NoopProcessor().input_model is models.NoopInput
