import subprocess
import sys

from jobdesk.runtime import launch


def test_worker_command_from_a_python_install_runs_the_cli_module():
    argv = launch.worker_command("--concurrency", "2")
    assert argv == [sys.executable, "-m", "jobdesk.cli", "worker", "--concurrency", "2"]
    out = subprocess.run([*argv[:-3], "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("jobdesk ")


def test_worker_command_in_a_bundle_runs_the_bundle_itself(monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/jobdesk/jobdesk")
    assert launch.worker_command() == ["/opt/jobdesk/jobdesk", "worker"]
