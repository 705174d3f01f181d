"""Before Qt starts: can it open a window here? Qt aborts the whole process (exit 134) when its
platform plugin cannot load, when DISPLAY points at no X server, and for an unknown
QT_QPA_PLATFORM; Python cannot catch that. So the console checks first and answers with one
line that says what to install or set.

Imports no Qt: the plugin folder is passed in, so the checks run (and are tested) anywhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Libraries Qt's Linux platform plugins load, and the packages that bring them.
PACKAGES: dict[str, tuple[str, str]] = {  # soname: (Debian/Ubuntu, Fedora/RHEL)
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libSM.so.6": ("libsm6", "libSM"),
    "libICE.so.6": ("libice6", "libICE"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libwayland-client.so.0": ("libwayland-client0", "libwayland-client"),
    "libwayland-cursor.so.0": ("libwayland-cursor0", "libwayland-cursor"),
    "libwayland-egl.so.1": ("libwayland-egl1", "libwayland-egl"),
}
# The other libxcb extensions ship in one package on Fedora, one each on Debian.
_XCB_EXTENSION = re.compile(r"^libxcb-([a-z0-9]+)\.so\.\d+$")

# The set that made the console open under a real X server on a fresh Debian machine.
XCB_PACKAGES_DEBIAN = ("libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libxcb-image0",
                       "libxcb-render-util0", "libxcb-xkb1", "libxkbcommon-x11-0", "libxcb-randr0",
                       "libxcb-shape0", "libxcb-xinerama0", "libgl1", "libegl1", "libfontconfig1")


@dataclass(frozen=True)
class Problem:
    """Why Qt cannot start here, in one line, and the Debian packages that would fix it."""

    message: str
    debian_packages: tuple[str, ...] = ()


def packages_for(sonames: Sequence[str]) -> tuple[list[str], list[str]]:
    """The Debian/Ubuntu and Fedora/RHEL packages that bring these libraries."""
    debian: list[str] = []
    fedora: list[str] = []
    for name in sonames:
        if name in PACKAGES:
            deb, rpm = PACKAGES[name]
        elif match := _XCB_EXTENSION.match(name):
            deb, rpm = f"libxcb-{match.group(1)}0", "libxcb"
        else:
            deb = rpm = name.split(".so")[0]
        debian += [deb] if deb not in debian else []
        fedora += [rpm] if rpm not in fedora else []
    return debian, fedora


def missing_libraries(ldd_output: str) -> list[str]:
    """The sonames `ldd` reports as "not found", in order, once each."""
    found = re.findall(r"^\s*(\S+)\s+=>\s+not found", ldd_output, flags=re.MULTILINE)
    return list(dict.fromkeys(found))


def ldd(path: Path) -> str:
    """`ldd` of a plugin; empty when there is no ldd (then the dynamic loader is asked)."""
    tool = shutil.which("ldd")
    if tool is None:
        return ""
    result = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=20, check=False)
    return result.stdout


def _loader_missing(path: Path) -> list[str]:
    """Without ldd: load the plugin; the loader's error names the first missing library."""
    try:
        ctypes.CDLL(str(path))
    except OSError as exc:
        match = re.search(r"(\S+\.so[.\d]*): cannot open shared object file", str(exc))
        return [match.group(1)] if match else []
    return []


def plugin_missing_libraries(path: Path) -> list[str]:
    """The libraries a plugin needs that this system lacks."""
    if shutil.which("ldd"):
        return missing_libraries(ldd(path))
    return _loader_missing(path)


def candidate_platforms(env: dict[str, str]) -> list[str]:
    """The platform plugins Qt will try, in order."""
    chosen = env.get("QT_QPA_PLATFORM", "").strip()
    if chosen:
        return [part.split(":", 1)[0].strip() for part in chosen.split(";") if part.strip()]
    if env.get("WAYLAND_DISPLAY") and (env.get("XDG_SESSION_TYPE") == "wayland" or not env.get("DISPLAY")):
        return ["wayland", "xcb"]
    return ["xcb"]


def x_server_reachable(display: str) -> bool:
    """Whether an X server answers at `display` (it opens and closes one xcb connection)."""
    name = ctypes.util.find_library("xcb")
    if name is None:
        return True  # cannot tell; the plugin check has already named libxcb if it is missing
    xcb = ctypes.CDLL(name)
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    conn = xcb.xcb_connect(display.encode(), None)
    try:
        return conn is not None and xcb.xcb_connection_has_error(conn) == 0
    finally:
        if conn is not None:
            xcb.xcb_disconnect(conn)


def wayland_reachable(env: dict[str, str]) -> bool:
    socket = env.get("WAYLAND_DISPLAY", "wayland-0")
    path = Path(socket) if socket.startswith("/") else Path(env.get("XDG_RUNTIME_DIR", "/nonexistent")) / socket
    return path.exists()


def check_platform(plugin_dir: Path, env: dict[str, str] | None = None, *,
                   inspect: Callable[[Path], list[str]] | None = None,
                   x_server: Callable[[str], bool] = x_server_reachable) -> Problem | None:
    """None when Qt can start one of its candidate platforms here, else the first problem.

    `inspect` lists a plugin's missing libraries (by default `ldd`, else the dynamic loader).
    """
    env = dict(os.environ if env is None else env)
    if not sys.platform.startswith("linux"):
        return None
    inspect = inspect or plugin_missing_libraries
    available = sorted(p.name[4:-3] for p in (plugin_dir / "platforms").glob("libq*.so"))
    problems: list[Problem] = []
    for platform in candidate_platforms(env):
        if platform not in available:
            problems.append(Problem(f"unknown QT_QPA_PLATFORM {platform!r}; this Qt has: {', '.join(available)}"))
            continue
        if platform == "xcb" and not env.get("DISPLAY"):
            problems.append(Problem("no display to open the console on (DISPLAY and WAYLAND_DISPLAY are unset); "
                                    "run it with QT_QPA_PLATFORM=offscreen, or use the commands: jobdesk --help"))
            continue
        missing = inspect(plugin_dir / "platforms" / f"libq{platform}.so")
        if missing:
            debian, fedora = packages_for(missing)
            extra = [p for p in XCB_PACKAGES_DEBIAN if p not in debian] if platform == "xcb" else []
            problems.append(Problem(
                f"the console cannot open a window: Qt's {platform} platform needs {', '.join(missing)}; "
                f"install them with `apt-get install {' '.join(debian)}` (Debian, Ubuntu) or "
                f"`dnf install {' '.join(fedora)}` (Fedora, RHEL), or run with QT_QPA_PLATFORM=offscreen",
                tuple(debian + extra)))
            continue
        if platform == "xcb":
            display = env["DISPLAY"]
            if not x_server(display):
                problems.append(Problem(f"no X server answers at DISPLAY={display}; start one or fix DISPLAY "
                                        f"(or run with QT_QPA_PLATFORM=offscreen)"))
                continue
        if platform == "wayland" and not wayland_reachable(env):
            problems.append(Problem(f"no Wayland compositor at WAYLAND_DISPLAY={env.get('WAYLAND_DISPLAY', '')}"))
            continue
        return None
    return problems[0] if problems else Problem("no Qt platform to try (QT_QPA_PLATFORM is empty)")


def install_debian_packages(packages: Sequence[str], *, why: str = "for the console's window") -> bool:
    """As root with apt-get (containers, CI): install the packages; True when it worked.

    One of our processes at a time runs apt-get (the test suite runs on two, and each may need
    a package): a second apt-get would fail on dpkg's lock rather than wait for it. Another
    program's apt-get is waited for too, up to two minutes."""
    if not packages or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return False
    import fcntl  # Linux only, like apt-get

    print(f"jobdesk: installing {' '.join(packages)} {why} (apt-get)", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait = ["-o", "DPkg::Lock::Timeout=120"]
    with open(os.path.join(tempfile.gettempdir(), "jobdesk-apt-get.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for argv in (["apt-get", *wait, "update", "-qq"],
                     ["apt-get", *wait, "install", "-y", "-qq", "--no-install-recommends", *packages]):
            if subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=False).returncode != 0:
                return False
    return True
