"""A copy of the checkout's source for a build to work in: the files git tracks and the new ones
it does not ignore, as they are in the working tree (links kept as links). A build writes `build/` and `*.egg-info`
beside its source, so two builds in the checkout itself (two test processes at once) would
trip over each other, and leave those folders behind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copy_source(dest: Path) -> Path:
    """Copy the checkout's source files into `dest` (created); return `dest`."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_symlink():  # `jobdesk` and `worker/console`, the links that name the import package
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source.readlink())
        elif source.is_file():  # a tracked file deleted in the working tree is left out
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest
