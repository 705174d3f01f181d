"""The settings read without pydantic: the same values as pydantic-settings gives, taken only when
certain, and pydantic-settings (its values, its errors) in every other case."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobdesk.core import plain_settings, settings_index
from jobdesk.core.errors import SettingsError
from jobdesk.core.plain_settings import PlainSettings, load_settings, read_plain
from jobdesk.core.settings import Settings
from jobdesk.core.settings import load_settings as validated_settings
from tests.helpers import ROOT


def fields(settings: object) -> dict[str, object]:
    """Each field's value as the settings object holds it."""
    return {name: getattr(settings, name) for name in Settings.model_fields}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting in the environment, and a working folder without a `.env` file."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_the_settings_index_is_up_to_date() -> None:
    text = (ROOT / "worker" / "core" / "settings_index.py").read_text()
    assert plain_settings.index_text() == text, (
        "worker/core/settings_index.py is out of date: run `python -m jobdesk.core.plain_settings --write`")
    assert list(settings_index.FIELDS) == list(Settings.model_fields)


# Environments read without pydantic: every plain kind of field, at and inside its bounds.
PLAIN = [
    {},
    {"DATABASE_URL": "postgresql://u@db.example/jobs?sslmode=disable"},
    {"DATABASE_URL": "", "DATABASE_LISTEN_URL": "postgresql://u@direct/jobs"},
    {"MAX_CONCURRENT_JOBS": "10", "DB_POOL_SIZE": "2", "JOB_METRICS_PORT": "9100"},
    {"MAX_CONCURRENT_JOBS": "10000", "JOB_STATEMENT_TIMEOUT": "2.5", "JOB_SHUTDOWN_TIMEOUT": "0"},
    {"JOBDESK_AUTOSTART_WORKER": "false", "JOBDESK_NOTIFICATIONS": "0", "JOBDESK_API_HOST": "0.0.0.0"},
    {"JOBDESK_AUTOSTART_WORKER": "true", "JOBDESK_NOTIFICATIONS": "1", "JOB_PROCESSOR_POLL_INTERVAL": "0.05"},
    {"NOT_A_SETTING": "x", "job_timeout": "lower case is not the setting"},
]


@pytest.mark.parametrize("env", PLAIN)
def test_plain_environments_read_as_pydantic_settings_reads_them(env: dict[str, str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    plain = read_plain()
    assert isinstance(plain, PlainSettings)
    expected = fields(Settings())
    assert vars(plain) == expected
    assert {k: type(v) for k, v in vars(plain).items()} == {k: type(v) for k, v in expected.items()}
    assert fields(load_settings()) == expected


# Environments pydantic-settings reads: a list, a duration, a per-type limit, a field with its own
# validator, an unusual spelling, a value out of bounds, a bad value.
VALIDATED = [
    {"JOB_RETRY_INTERVALS": "1,2,3"},
    {"JOB_RETENTION_COMPLETED": "2d"},
    {"JOB_TYPE_LIMITS": "video.render=2"},
    {"LOG_LEVEL": "debug"},
    {"DATABASE_URL": "postgresql://p/db", "DATABASE_READ_URL": "postgresql://r/db"},
    {"MAX_CONCURRENT_JOBS": " 10"},
    {"JOB_STATEMENT_TIMEOUT": "1e1"},
    {"JOBDESK_AUTOSTART_WORKER": "yes"},
]


@pytest.mark.parametrize("env", VALIDATED)
def test_other_environments_go_to_pydantic_settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert read_plain() is None
    settings = load_settings()
    assert isinstance(settings, Settings)
    assert fields(settings) == fields(Settings())


@pytest.mark.parametrize(("name", "value"), [("MAX_CONCURRENT_JOBS", "0"), ("MAX_CONCURRENT_JOBS", "10001"),
                                             ("DB_POOL_SIZE", "abc"), ("JOB_LEASE_TIMEOUT", "0"),
                                             ("JOB_METRICS_PORT", "70000"), ("JOBDESK_NOTIFICATIONS", "maybe")])
def test_a_bad_value_gets_pydantic_settings_error(name: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, value)
    assert read_plain() is None
    with pytest.raises(SettingsError) as plain_error:
        load_settings()
    with pytest.raises(SettingsError) as validated_error:
        validated_settings()
    assert str(plain_error.value) == str(validated_error.value)
    assert str(plain_error.value).startswith(f"invalid setting {name}: ")


def test_a_dot_env_file_goes_to_pydantic_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MAX_CONCURRENT_JOBS=3\n")
    assert read_plain() is None
    assert load_settings().MAX_CONCURRENT_JOBS == 3


def test_overrides_go_to_pydantic_settings() -> None:
    settings = load_settings(DATABASE_URL="postgresql://x/y", JOB_RETRY_INTERVALS=[1.0])
    assert isinstance(settings, Settings)
    assert settings.JOB_RETRY_INTERVALS == [1.0]


def test_a_stale_index_goes_to_pydantic_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_index, "CHECKSUM", settings_index.CHECKSUM + 1)
    assert read_plain() is None
    assert isinstance(load_settings(), Settings)


def test_plain_settings_are_changed_and_copied_as_settings_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_CONCURRENT_JOBS", "4")
    plain = read_plain()
    assert plain is not None
    plain.MAX_CONCURRENT_JOBS = 7  # as `jobdesk worker --concurrency 7` does
    assert plain.model_dump()["MAX_CONCURRENT_JOBS"] == 7  # Settings' methods, on the same values
    twin = copy.deepcopy(plain)
    assert isinstance(twin, PlainSettings) and vars(twin) == vars(plain)
    twin.JOB_RETRY_INTERVALS.append(1)
    assert plain.JOB_RETRY_INTERVALS == Settings().JOB_RETRY_INTERVALS  # defaults are not shared
    with pytest.raises(AttributeError):
        plain.NO_SUCH_SETTING  # noqa: B018


def test_reading_plain_settings_loads_no_pydantic(tmp_path: Path) -> None:
    code = ("import json, sys; from jobdesk.core.plain_settings import load_settings; s = load_settings(); "
            "print(json.dumps([type(s).__name__, s.DATABASE_URL, sorted(m for m in sys.modules if 'pydantic' in m)]))")
    env = {k: v for k, v in os.environ.items() if k not in Settings.model_fields}
    env.update(DATABASE_URL="postgresql://u@h/db", MAX_CONCURRENT_JOBS="10")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={**env, "PYTHONPATH": str(ROOT)}).stdout
    assert json.loads(out) == ["PlainSettings", "postgresql://u@h/db", []]
