"""Packaging glue: the build puts the top-level `sql/` and `resources/` folders into the packages.

The repository keeps the numbered migrations in `sql/` and the console's icons and styles in
`resources/`, where people look for them; an installed jobdesk reads them as package data, at
`jobdesk/sql/` and `jobdesk/console/resources/` (see `jobdesk.core.paths`). Everything else is in
pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_FOLDERS = {"sql": ("jobdesk", "sql"), "resources": ("jobdesk", "console", "resources")}


class BuildWithData(build_py):
    """build_py, then a copy of each data folder into its package in the build tree."""

    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        for source, target in DATA_FOLDERS.items():
            if (root / source).is_dir():
                shutil.copytree(root / source, Path(self.build_lib, *target), dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithData})
