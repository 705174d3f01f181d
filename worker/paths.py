"""Where jobdesk finds the files it ships (migrations, resources) and keeps its data."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs


def project_root() -> Path:
    """The folder that holds `sql/` and `resources/`: the checkout, or the bundle."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        return Path(bundle)
    return Path(__file__).resolve().parent.parent


def sql_dir() -> Path:
    return project_root() / "sql"


def data_dir() -> Path:
    """The user's jobdesk data folder; JOBDESK_DATA_DIR overrides it.

    As root the embedded server runs as an unprivileged user, who cannot enter /root, so root's
    data lives in /var/lib/jobdesk instead of under its home folder.
    """
    override = os.environ.get("JOBDESK_DATA_DIR")
    if override:
        return Path(override).expanduser().resolve()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/jobdesk")
    return Path(platformdirs.user_data_dir("jobdesk", appauthor=False))
