"""A checkout whose links (`jobdesk` -> worker, `worker/console` -> ../desktop) are plain files, as
git writes them without symlink support (Windows without Developer Mode, `core.symlinks=false`):
what needs the links says so in one line; what does not (the builds) goes on. The wheel, the sdist
and the bundle built from such a clone are tested in test_installed_wheel, test_sdist and test_bundle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.source_tree import ROOT, clone_without_links

RESTORE = "git config core.symlinks true && git checkout -- jobdesk worker/console"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone_without_links(tmp_path_factory.mktemp("links") / "clone")


def _make(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    return subprocess.run(["make", "-C", str(folder), "--no-print-directory", *args], capture_output=True,
                          text=True, timeout=60, check=False, env=env)


@pytest.mark.parametrize("goal", ["lint", "test"])
def test_make_says_in_one_line_how_to_restore_the_links(clone: Path, goal: str) -> None:
    done = _make(clone, goal)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and RESTORE in lines[0] and "are plain files" in lines[0], done.stderr
    assert not (clone / ".venv").exists(), "it stops before any work"


def test_make_builds_without_the_links_and_lints_with_them(clone: Path) -> None:
    for goal, command in (("dist-pypi", "-m build"), ("dist", "-m PyInstaller")):
        planned = _make(clone, "--dry-run", goal)
        assert planned.returncode == 0 and command in planned.stdout, planned.stdout + planned.stderr
    assert _make(ROOT, "--dry-run", "lint").returncode == 0, "the checkout's links are links"


def test_python_m_jobdesk_says_in_one_line_how_to_restore_the_links(clone: Path, tmp_path: Path) -> None:
    """jobdesk found in the clone's worker/ (as an install made while the links were there finds
    it), whose console link is a plain file."""
    (tmp_path / "jobdesk").symlink_to(clone / "worker")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    # -S: no site-packages, so that the checkout's own editable install cannot supply the console.
    done = subprocess.run([sys.executable, "-S", "-m", "jobdesk", "--version"], capture_output=True, text=True,
                          timeout=60, check=False, env=env, cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and RESTORE in lines[0] and "pip install -e ." in lines[0], done.stderr
