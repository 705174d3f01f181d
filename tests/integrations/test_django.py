"""Django 6's tasks on jobdesk (`jobdesk.integrations.django.JobdeskBackend`), against Django 6.1 in
the second venv (Python 3.12+, see django_venv): the small project in django_project/ enqueues from
views in their transaction, a real `jobdesk worker --django mysite.settings` runs the tasks, and the
results are read back, a failing task's retries included (django_project/scenario.py)."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers import cli_env, run_cli
from tests.integrations import django_venv

pytestmark = pytest.mark.timeout(600)  # the first run makes the venv


@pytest.mark.parametrize("through", ["direct", "pgbouncer"])
def test_django_project_tasks_run_on_jobdesk(through: str, dsn: str, request: pytest.FixtureRequest) -> None:
    """The same project on the database itself, and behind PgBouncer in transaction mode (Django,
    the backend's reads and the worker all through it)."""
    python = django_venv.ensure()
    project = django_venv.ROOT / "tests" / "integrations" / "django_project"
    url = dsn if through == "direct" else request.getfixturevalue("pgbouncer").url(dsn, declared=False)
    env = cli_env(url)
    env["PYTHONPATH"] = str(project)
    out = subprocess.run([str(python), "scenario.py"], env=env, cwd=project, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr[-4000:]}"
    assert "all checks passed" in out.stdout


def test_worker_django_without_django_says_so_in_one_line(dsn: str) -> None:
    """In the project's own venv (Python 3.11, no Django), --django is refused in one line."""
    out = run_cli("worker", "--django", "mysite.settings", dsn=dsn)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Django 6" in lines[0] and "Traceback" not in out.stderr, out.stderr
