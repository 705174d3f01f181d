"""Where jobdesk finds the files it ships (migrations, resources) and keeps its data.

The repository keeps `sql/` and `resources/` at its top level; a built package carries them as
package data (`jobdesk/sql`, `jobdesk/console/resources`), and the PyInstaller bundle at its root.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import os
import sys
from pathlib import Path


def project_root() -> Path:
    """The folder that holds `sql/` and `resources/`: the checkout, or the bundle."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        return Path(bundle)
    return Path(__file__).resolve().parents[2]


def in_bundle() -> bool:
    """Whether this is the packaged binary rather than a Python install."""
    return bool(getattr(sys, "frozen", False))


def program_env() -> dict[str, str] | None:
    """The environment for programs that are not jobdesk (PostgreSQL, setpriv, useradd).

    A bundle's launcher points LD_LIBRARY_PATH at the libraries inside the bundle. Other programs
    must load their own or the system's, so they get the variable as it was before the bundle
    started. None (inherit everything) outside a bundle.
    """
    if not in_bundle():
        return None
    env = dict(os.environ)
    original = env.pop("LD_LIBRARY_PATH_ORIG", None)
    if original is None:
        env.pop("LD_LIBRARY_PATH", None)
    else:
        env["LD_LIBRARY_PATH"] = original
    return env


def _shipped(package: str, folder: str) -> Path:
    """`folder` as the package data of `package` when installed, else from the checkout or bundle."""
    if not getattr(sys, "_MEIPASS", None) and importlib.util.find_spec(package) is not None:
        packaged = Path(str(importlib.resources.files(package).joinpath(folder)))
        if packaged.is_dir():
            return packaged
    return project_root() / folder


def sql_dir() -> Path:
    """The numbered migrations."""
    return _shipped("jobdesk", "sql")


def resources_dir() -> Path:
    """The console's icons and styles."""
    return _shipped("jobdesk.console", "resources")


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
    import platformdirs  # only where no folder is given: a worker on DATABASE_URL never loads it

    return Path(platformdirs.user_data_dir("jobdesk", appauthor=False))
