"""The checkout's source for a build to work in, away from the checkout: a build writes `build/` and
`*.egg-info` beside its source, so two builds in the checkout itself (two test processes at once)
would trip over each other, and leave those folders behind.

`clone_without_links` makes it as a Windows machine without Developer Mode gets it: a clone made
with `git clone -c core.symlinks=false`, whose links (`jobdesk`, `worker/console`) are plain files
that hold the link's target. The working tree's changes, committed or not (what git tracks, and the
new files it does not ignore), are laid over it, so the build is of the checkout as it stands."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINKS = ("jobdesk", "worker/console")  # the checkout's links, for imports and tools in the checkout


def _git(*args: str, cwd: Path = ROOT) -> list[str]:
    listed = subprocess.run(["git", "-C", str(cwd), *args, "-z"], capture_output=True, check=True).stdout.decode()
    return list(filter(None, listed.split("\0")))


def clone_without_links(dest: Path) -> Path:
    """Clone the checkout into `dest` (which must not exist) with core.symlinks=false, lay the
    working tree over it, and return `dest`."""
    subprocess.run(["git", "clone", "--quiet", "-c", "core.symlinks=false", str(ROOT), str(dest)],
                   capture_output=True, check=True)
    present = set(_git("ls-files", "--cached", "--others", "--exclude-standard"))
    for name in set(_git("ls-files", cwd=dest)) - {n for n in present if (ROOT / n).exists()}:
        (dest / name).unlink()  # deleted in the working tree
    for name in present:
        source, target = ROOT / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # a plain file holding the target, as git writes it without links
            target.write_text(str(source.readlink()))
        elif source.is_file():
            shutil.copy2(source, target)
    for link in LINKS:
        assert (dest / link).is_file() and not (dest / link).is_symlink(), link
    return dest
