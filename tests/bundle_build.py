"""The packaged binary's build, started in the background as the session begins.

PyInstaller takes about a minute of one core. Started when the tests are collected, at a lower
priority, it runs while the rest of the suite mostly waits on PostgreSQL and subprocesses, and
the bundle's tests (moved to the end of the run) find it built.

On several processes (pytest-xdist), the controller builds once, and each worker waits for that
build through the folder named in WORKSPACE_ENV: where the build's exit code appears when it ends.

It builds from a clone whose links are plain files (`git clone -c core.symlinks=false`, as on Windows
without Developer Mode): jobdesk.spec reads the real folders, worker/ and desktop/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.packaging.source_tree import clone_without_links

BUILD_TIMEOUT_S = 480
WORKSPACE_ENV = "JOBDESK_TEST_BUNDLE_WORKSPACE"
EXIT_CODE = "exit-code"  # written into the workspace when the build ends


class BundleBuild:
    """The build this process runs."""

    def __init__(self) -> None:
        # Reachable by the unprivileged user the embedded server runs as when the tests run as root.
        self.workspace = Path(tempfile.mkdtemp(prefix="jdbundle-"))
        self.workspace.chmod(0o755)
        self.log = self.workspace / "build.log"
        source = clone_without_links(self.workspace / "source")
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                ["nice", "-n", "10", sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
                 "--distpath", str(self.workspace / "dist"), "--workpath", str(self.workspace / "build"),
                 str(source / "jobdesk.spec")], cwd=source, stdout=out, stderr=subprocess.STDOUT)
        threading.Thread(target=self._record_exit, name="bundle-build", daemon=True).start()

    def _record_exit(self) -> None:
        code = self.proc.wait()
        if code == 0:
            shutil.rmtree(self.workspace / "build", ignore_errors=True)
            shutil.rmtree(self.workspace / "source", ignore_errors=True)
        (self.workspace / EXIT_CODE).write_text(str(code))

    def wait(self) -> Path:
        return SharedBuild(self.workspace).wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.workspace, ignore_errors=True)


class SharedBuild:
    """The build another process of this session runs, in `workspace`."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace

    def wait(self) -> Path:
        """The built executable, once the build has ended; AssertionError with its log if it failed."""
        exit_code = self.workspace / EXIT_CODE
        deadline = time.monotonic() + BUILD_TIMEOUT_S
        while not exit_code.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"the bundle build took over {BUILD_TIMEOUT_S} s")
            time.sleep(0.5)
        assert exit_code.read_text() == "0", (self.workspace / "build.log").read_text()[-4000:]
        return self.workspace / "dist" / "jobdesk" / "jobdesk"

    def close(self) -> None:
        """The owner removes it."""


_build: BundleBuild | SharedBuild | None = None


def start() -> None:
    """Start the build, or join the one the session's controller started."""
    global _build
    if _build is None:
        shared = os.environ.get(WORKSPACE_ENV)
        _build = SharedBuild(Path(shared)) if shared else BundleBuild()


def share() -> None:
    """Start the build for the workers this process will start (they inherit WORKSPACE_ENV)."""
    start()
    assert _build is not None
    os.environ[WORKSPACE_ENV] = str(_build.workspace)


def current() -> BundleBuild | SharedBuild:
    start()
    assert _build is not None
    return _build


def stop() -> None:
    global _build
    if _build is not None:
        _build.close()
        _build = None
