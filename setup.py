"""Packaging glue, for what pyproject.toml cannot say.

- The packages: one import package, `jobdesk`, whose folders [tool.setuptools] package-dir names
  (the engine in `worker/`, the console in `desktop/`); every package below each folder is listed
  here, under its import name. A link that the checkout keeps for development (`worker/console`) is
  not followed: the console comes from `desktop/` itself.
- The data: the build puts the top-level `sql/` and `resources/` folders into the packages. The
  repository keeps the numbered migrations in `sql/` and the console's icons and styles in
  `resources/`, where people look for them; an installed jobdesk reads them as package data, at
  `jobdesk/sql/` and `jobdesk/console/resources/` (see `jobdesk.core.paths`).
"""

import shutil
import tomllib
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA_FOLDERS = {"sql": ("jobdesk", "sql"), "resources": ("jobdesk", "console", "resources")}


def package_dirs() -> dict[str, str]:
    """pyproject.toml's [tool.setuptools] package-dir: import name -> folder."""
    with open(ROOT / "pyproject.toml", "rb") as config:
        return tomllib.load(config)["tool"]["setuptools"]["package-dir"]


def packages(mapping: dict[str, str]) -> list[str]:
    """Each mapped package and the packages in its folder, by import name; a subpackage that the
    mapping puts elsewhere is taken from there, not from under its parent's folder."""
    found = []
    for name, folder in mapping.items():
        found.append(name)
        for sub in find_packages(str(ROOT / folder)):
            full = f"{name}.{sub}"
            if not any(full == other or full.startswith(f"{other}.") for other in mapping if other != name
                       and other.startswith(f"{name}.")):
                found.append(full)
    return sorted(found)


class BuildWithData(build_py):
    """build_py, then a copy of each data folder into its package in the build tree."""

    def run(self) -> None:
        super().run()
        for source, target in DATA_FOLDERS.items():
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, Path(self.build_lib, *target), dirs_exist_ok=True)


setup(packages=packages(package_dirs()), cmdclass={"build_py": BuildWithData})
