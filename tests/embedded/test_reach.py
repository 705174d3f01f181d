"""A data folder the embedded server's user cannot reach: the error names the folder in the way."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.helpers import run_cli

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="only root runs the server as another user (CI runs as root)")


def test_a_private_parent_is_named_not_the_data_folder_under_it() -> None:
    """JOBDESK_DATA_DIR=…/priv/data, where …/priv is 0700 and root's: `priv` is in the way."""
    private = Path(tempfile.mkdtemp(prefix="jdpriv-"))  # 0700, like /root
    try:
        data = private / "data"
        data.mkdir(mode=0o755)
        out = run_cli("jobs", dsn=None, JOBDESK_DATA_DIR=str(data))
        assert out.returncode == 1, out.stdout
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
        assert f"cannot enter {private};" in lines[0], lines[0]
        assert str(data) not in lines[0], lines[0]
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_the_data_folder_itself_is_named_when_it_is_the_one_closed() -> None:
    base = Path(tempfile.mkdtemp(prefix="jdopen-"))
    try:
        base.chmod(0o755)
        data = base / "data"
        data.mkdir(mode=0o700)
        out = run_cli("jobs", dsn=None, JOBDESK_DATA_DIR=str(data))
        assert out.returncode == 1, out.stdout
        assert f"cannot enter {data};" in out.stderr, out.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)
