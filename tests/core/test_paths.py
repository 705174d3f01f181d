"""Where jobdesk finds its files, and what other programs see when started from a bundle."""

from __future__ import annotations

import sys

import pytest

from jobdesk.core import paths


def test_outside_a_bundle_programs_inherit_the_environment() -> None:
    assert not paths.in_bundle()
    assert paths.program_env() is None


@pytest.fixture
def bundle(monkeypatch: pytest.MonkeyPatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    return tmp_path


def test_in_a_bundle_files_come_from_the_bundle(bundle) -> None:  # type: ignore[no-untyped-def]
    assert paths.in_bundle()
    assert paths.sql_dir() == bundle / "sql"


def test_other_programs_do_not_load_the_bundles_libraries(bundle, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("LD_LIBRARY_PATH_ORIG", raising=False)
    env = paths.program_env()
    assert env is not None and "LD_LIBRARY_PATH" not in env and env["PATH"]


def test_other_programs_get_the_library_path_the_user_had(bundle, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LD_LIBRARY_PATH_ORIG", "/opt/site/lib")
    env = paths.program_env()
    assert env is not None and env["LD_LIBRARY_PATH"] == "/opt/site/lib" and "LD_LIBRARY_PATH_ORIG" not in env
