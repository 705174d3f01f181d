"""The second venv the Django tests run in: Django 6 needs Python 3.12 or later, and the project's
own venv is on 3.11. `python -m tests.integrations.django_venv` (called by `make test`) makes it,
at .venv-django, with jobdesk installed editable and Django at the version the `django` extra pins.
The Django test makes it too, when it is missing, and fails naming what to install when no Python
3.12 or 3.13 can be found."""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("JOBDESK_DJANGO_VENV", ROOT / ".venv-django"))
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".installed"


def find_interpreter() -> str | None:
    """A Python 3.12 or 3.13: on PATH, or under pyenv."""
    for name in ("python3.13", "python3.12"):
        found = shutil.which(name)
        if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
            return found
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for pattern in ("3.13.*", "3.12.*"):
        for version in sorted(glob.glob(str(pyenv / pattern / "bin" / "python3")), reverse=True):
            return version
    return None


def ensure() -> Path:
    """The venv's python, made (once, under a lock) if it is missing or older than pyproject.toml."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / ".venv-django.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if STAMP.exists() and STAMP.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime:
            return PYTHON
        interpreter = find_interpreter()
        if interpreter is None:
            raise RuntimeError("the Django tests need Python 3.12 or 3.13 (Django 6 does not run on 3.11): "
                               "install one (e.g. `pyenv install 3.12` or the python3.12 package) and run again")
        if not PYTHON.exists():
            subprocess.run([interpreter, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[django]"], check=True,
                       cwd=ROOT)
        STAMP.touch()
    return PYTHON


if __name__ == "__main__":
    try:
        print(ensure())
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
