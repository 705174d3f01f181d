"""The packaged binary's build, started in the background as the session begins.

PyInstaller takes about a minute of one core. Started when the tests are collected, at a lower
priority, it runs while the rest of the suite mostly waits on PostgreSQL and subprocesses, and
the bundle's tests (moved to the end of the run) find it built.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT_S = 480


class BundleBuild:
    def __init__(self) -> None:
        # Reachable by the unprivileged user the embedded server runs as when the tests run as root.
        self.workspace = Path(tempfile.mkdtemp(prefix="jdbundle-"))
        self.workspace.chmod(0o755)
        self.log = self.workspace / "build.log"
        self.started = time.monotonic()
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                ["nice", "-n", "10", sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
                 "--distpath", str(self.workspace / "dist"), "--workpath", str(self.workspace / "build"),
                 str(ROOT / "jobdesk.spec")], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)

    def wait(self) -> Path:
        """The built executable, once the build has ended; AssertionError with its log if it failed."""
        left = BUILD_TIMEOUT_S - (time.monotonic() - self.started)
        try:
            code = self.proc.wait(timeout=max(left, 1))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the bundle build took over {BUILD_TIMEOUT_S} s") from None
        assert code == 0, self.log.read_text()[-4000:]
        shutil.rmtree(self.workspace / "build", ignore_errors=True)
        return self.workspace / "dist" / "jobdesk" / "jobdesk"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.workspace, ignore_errors=True)


_build: BundleBuild | None = None


def start() -> None:
    global _build
    if _build is None:
        _build = BundleBuild()


def current() -> BundleBuild:
    start()
    assert _build is not None
    return _build


def stop() -> None:
    global _build
    if _build is not None:
        _build.close()
        _build = None
