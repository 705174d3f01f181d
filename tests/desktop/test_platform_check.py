"""Before Qt starts, the console checks that it can open a window, and says in one line what
is missing instead of letting Qt abort the process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QLibraryInfo

from jobdesk.console import platform_check
from jobdesk.console.platform_check import check_platform, missing_libraries, packages_for
from tests.helpers import cli_env

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath))

LDD_WITHOUT_CURSOR = """\
\tlinux-vdso.so.1 (0x00007ffc8a5f9000)
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f3b1c000000)
\tlibxcb-cursor.so.0 => not found
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f3b1bfd0000)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-xinput.so.0 => not found
"""


def console(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in cli_env(None).items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env={**base, **env},
                          cwd=ROOT, timeout=60)


def test_ldd_output_names_each_missing_library_once() -> None:
    assert missing_libraries(LDD_WITHOUT_CURSOR) == ["libxcb-cursor.so.0", "libxcb-xinput.so.0"]
    assert missing_libraries("\tlibc.so.6 => /lib/libc.so.6 (0x1)\n") == []


def test_packages_are_named_for_debian_and_fedora() -> None:
    assert packages_for(["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-xinput.so.0"]) == (
        ["libxcb-cursor0", "libxcb-icccm4", "libxcb-xinput0"], ["xcb-util-cursor", "xcb-util-wm", "libxcb"])


def test_a_hidden_library_is_one_line_naming_the_packages() -> None:
    problem = check_platform(PLUGINS, {"DISPLAY": ":0"}, inspect=lambda path: missing_libraries(LDD_WITHOUT_CURSOR),
                             x_server=lambda display: True)
    assert problem is not None and "\n" not in problem.message
    assert problem.message == (
        "the console cannot open a window: Qt's xcb platform needs libxcb-cursor.so.0, libxcb-xinput.so.0; "
        "install them with `apt-get install libxcb-cursor0 libxcb-xinput0` (Debian, Ubuntu) or "
        "`dnf install xcb-util-cursor libxcb` (Fedora, RHEL), or run with QT_QPA_PLATFORM=offscreen")
    assert problem.debian_packages[:2] == ("libxcb-cursor0", "libxcb-xinput0")
    assert "libxcb-keysyms1" in problem.debian_packages, "make run installs the whole known set at once"


def test_platform_choice_follows_qt() -> None:
    assert platform_check.candidate_platforms({}) == ["xcb"]
    assert platform_check.candidate_platforms({"QT_QPA_PLATFORM": "offscreen"}) == ["offscreen"]
    assert platform_check.candidate_platforms({"QT_QPA_PLATFORM": "wayland;xcb:nograb"}) == ["wayland", "xcb"]
    assert platform_check.candidate_platforms({"WAYLAND_DISPLAY": "wayland-0"}) == ["wayland", "xcb"]
    no_problem = check_platform(PLUGINS, {"QT_QPA_PLATFORM": "offscreen"}, inspect=lambda path: [])
    assert no_problem is None


def test_the_console_with_a_hidden_library_exits_cleanly_with_one_line() -> None:
    hide = ("import sys, jobdesk.console.platform_check as p; "
            "p.plugin_missing_libraries = lambda path: ['libxcb-cursor.so.0']; "
            "import jobdesk.console.app; sys.exit(jobdesk.console.app.main([]))")
    done = console("-c", hide, QT_QPA_PLATFORM="xcb", DISPLAY=":93")
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("jobdesk: error: the console cannot open a window: Qt's xcb platform needs "
                           "libxcb-cursor.so.0; install them with `apt-get install libxcb-cursor0`")


def test_an_unknown_platform_is_one_line_not_an_abort() -> None:
    done = console("-m", "jobdesk.console.launcher", QT_QPA_PLATFORM="bogus")
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("jobdesk: error: unknown QT_QPA_PLATFORM 'bogus'; this Qt has: ") and "xcb" in line


def display_taken(number: int) -> bool:
    """A lock file in this /tmp, or a server on the abstract socket, which every process in the
    network namespace shares (another container's X server can hold it)."""
    if Path(f"/tmp/.X{number}-lock").exists():
        return True
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(f"\0/tmp/.X11-unix/X{number}")
        except OSError:
            return False
    return True


def start_xvfb() -> tuple[subprocess.Popen[bytes], str]:
    """Xvfb on a free display of this test process, once it accepts clients: not one fixed
    display, which two test processes (pytest -n 2) would share, the first to finish taking it
    away from the other; and not the first free one from :0 (`-displayfd` alone), which other X
    servers of the machine may be using. A server started on a number already in use exits
    without announcing it, and the next number is tried.

    `-noreset`: by default the server resets when its last client leaves (the fixture's own
    check), and a client that connects during the reset is refused ("could not connect to
    display"): under load, 4 of 450 back-to-back connections were, and none with -noreset."""
    first = 100 + os.getpid() % 800
    for number in range(first, first + 50):
        if display_taken(number):
            continue
        read_end, write_end = os.pipe()
        server = subprocess.Popen(["Xvfb", f":{number}", "-displayfd", str(write_end), "-noreset", "-screen", "0",
                                   "1280x800x24", "-nolisten", "tcp"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, pass_fds=(write_end,))
        os.close(write_end)
        with os.fdopen(read_end) as announced:
            if announced.readline().strip() == str(number):
                return server, f":{number}"
        server.wait(10)
    raise AssertionError(f"no free X display from :{first} to :{first + 49}")


@pytest.fixture(scope="module")
def xvfb() -> Iterator[str]:
    """A real X server; the console's libraries installed the way `make run` installs them (in a
    test process where a Qt test already made a QApplication, too)."""
    from jobdesk.console.devrun import window_problem

    if shutil.which("Xvfb") is None:
        assert platform_check.install_debian_packages(["xvfb", "xauth"]), "cannot install xvfb with apt-get"
    server, display = start_xvfb()
    old = {k: os.environ.get(k) for k in ("DISPLAY", "QT_QPA_PLATFORM")}
    os.environ["DISPLAY"] = display
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    try:
        problem = window_problem()  # installs what is missing, as root with apt-get
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert problem is None, problem
    yield display
    server.terminate()
    server.wait(10)


def test_no_x_server_behind_display_is_one_line(xvfb: str) -> None:
    done = console("-m", "jobdesk.console.launcher", DISPLAY=":94", QT_QPA_PLATFORM="xcb")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "jobdesk: error: no X server answers at DISPLAY=:94; start one or fix DISPLAY "
        "(or run with QT_QPA_PLATFORM=offscreen)"]


def test_the_console_opens_in_a_real_window(xvfb: str, dsn: str) -> None:
    from tests.helpers import run_cli

    run_cli("submit", "echo", "--input", '{"x": 1}', dsn=dsn)
    done = console("-m", "jobdesk.console.launcher", "--smoke-test", DISPLAY=xvfb, DATABASE_URL=dsn)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("smoke: connected to ") and done.stdout.endswith(" 1 job shown\n")
