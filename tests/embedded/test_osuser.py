"""The embedded server's system user: created once, safely, when many processes start at once."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="creating a system user needs root (CI runs as root)")

CREATE = ("import sys; from jobdesk.embedded.osuser import ensure_system_user; "
          "e = ensure_system_user(sys.argv[1]); print(e.pw_uid, e.pw_gid)")


def test_many_processes_creating_the_user_at_once_all_get_the_same_user() -> None:
    name = f"jobdesk-t{os.getpid() % 100000}"
    subprocess.run(["userdel", name], capture_output=True, check=False)
    try:
        procs = [subprocess.Popen([sys.executable, "-c", CREATE, name], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(8)]
        answers = [p.communicate(timeout=60) for p in procs]
        assert all(p.returncode == 0 for p in procs), [err for _, err in answers]
        ids = {out.strip() for out, _ in answers}
        entry = pwd.getpwnam(name)
        assert ids == {f"{entry.pw_uid} {entry.pw_gid}"}
        # setpriv, as the server's start uses it, finds the user each process was given
        done = subprocess.run(["setpriv", "--reuid", str(entry.pw_uid), "--regid", str(entry.pw_gid),
                               "--init-groups", "--", "id", "-u"], capture_output=True, text=True, check=False)
        assert done.stdout.strip() == str(entry.pw_uid), done.stderr
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)
