"""What the first pages say about jobdesk agrees with jobdesk: the package's name, the retries
the default gives, and where the data folder is."""

from __future__ import annotations

import re
from pathlib import Path

import platformdirs.macos
import platformdirs.unix
import pytest

from jobdesk.core.settings import Settings
from tests.helpers import ROOT

FIRST_PAGES = ("README.md", "docs/getting-started.md", "docs/processors.md", "docs/index.md")


@pytest.mark.parametrize("page", FIRST_PAGES)
def test_no_page_speaks_of_a_worker_package(page: str) -> None:
    """The import package is `jobdesk`; `worker/` is only the checkout's folder of it."""
    text = (ROOT / page).read_text()
    assert not re.search(r"`worker` package|package `worker`", text), page


def test_the_retries_each_page_counts_are_the_defaults() -> None:
    default = Settings.model_fields["JOB_RETRY_INTERVALS"].default
    runs = len(default) + 1
    processors = (ROOT / "docs" / "processors.md").read_text()
    django = (ROOT / "docs" / "django.md").read_text()
    assert f"(`{','.join(f'{s:g}' for s in default)}`) a job runs up to {runs} times" in processors
    said = re.findall(r"runs up\s+to (\w+) times", django)
    assert said == [str(runs)], said


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_data_folder_is_named_before_the_install(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the install section: where the embedded database's data is, and JOBDESK_DATA_DIR."""
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    start = " ".join((ROOT / page).read_text().split("## Install it into your own project", 1)[0].split())
    home = str(Path.home())
    linux = platformdirs.unix.Unix("jobdesk", appauthor=False).user_data_dir.replace(home, "~")
    mac = platformdirs.macos.MacOS("jobdesk", appauthor=False).user_data_dir.replace(home, "~")
    for said in (f"`{linux}` on Linux", f"`{mac}` on macOS", "`/var/lib/jobdesk` for root", "`JOBDESK_DATA_DIR`"):
        assert said in start, said


def test_root_s_data_folder_is_the_one_the_pages_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobdesk.core import paths

    monkeypatch.delenv("JOBDESK_DATA_DIR", raising=False)
    monkeypatch.setattr(paths.os, "geteuid", lambda: 0)
    assert str(paths.data_dir()) == "/var/lib/jobdesk"
    monkeypatch.setenv("JOBDESK_DATA_DIR", "/srv/project/jobdesk")
    assert str(paths.data_dir()) == "/srv/project/jobdesk"
