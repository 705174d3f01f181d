"""Django 6's tasks on jobdesk (`jobdesk.integrations.django.JobdeskBackend`), against Django 6.1 in
the second venv (Python 3.12+, see django_venv): the small project in django_project/ enqueues from
views in their transaction, a real `jobdesk worker --django mysite.settings` runs the tasks, and the
results are read back, a failing task's retries included (django_project/scenario.py)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from jobdesk.embedded.server import EmbeddedServer
from tests.helpers import cli_env, run_cli
from tests.integrations import django_venv

pytestmark = pytest.mark.timeout(600)  # the first run makes the venv

PROJECT = django_venv.ROOT / "tests" / "integrations" / "django_project"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """An embedded database's data folder of its own, stopped and removed after the test."""
    folder = Path(tempfile.mkdtemp(prefix="jddj-"))
    folder.chmod(0o755)
    yield folder
    EmbeddedServer(folder).stop()
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def project_env(dsn: str | None, **extra: str) -> dict[str, str]:
    env = cli_env(dsn, **extra)
    env["PYTHONPATH"] = str(PROJECT)
    return env


def run_scenario(env: dict[str, str]) -> None:
    out = subprocess.run([str(django_venv.ensure()), "scenario.py"], env=env, cwd=PROJECT, capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr[-4000:]}"
    assert "all checks passed" in out.stdout


@pytest.mark.parametrize("through", ["direct", "pgbouncer"])
def test_django_project_tasks_run_on_jobdesk(through: str, dsn: str, request: pytest.FixtureRequest) -> None:
    """The same project on the database itself, and behind PgBouncer in transaction mode (Django,
    the backend's reads and the worker all through it)."""
    url = dsn if through == "direct" else request.getfixturevalue("pgbouncer").url(dsn, declared=False)
    run_scenario(project_env(url))


def test_the_worker_runs_on_the_database_of_djangos_settings(dsn: str, data_dir: Path) -> None:
    """No DATABASE_URL: `jobdesk worker --django` runs on the database DATABASES names (the tasks'),
    not on the embedded default."""
    run_scenario(project_env(None, MYSITE_DATABASE_URL=dsn, JOBDESK_DATA_DIR=str(data_dir)))


def test_database_url_may_reach_djangos_database_another_way(dsn: str, request: pytest.FixtureRequest) -> None:
    """Django straight to PostgreSQL, DATABASE_URL through PgBouncer: two URLs, one database, as
    the servers answer; the worker runs on DATABASE_URL."""
    bounced = request.getfixturevalue("pgbouncer").url(dsn, declared=False)
    run_scenario(project_env(bounced, MYSITE_DATABASE_URL=dsn))


def test_django_on_the_embedded_database(data_dir: Path) -> None:
    """DATABASES = {"default": embedded_database()}, as docs/django.md shows: Django, the backend
    and the worker share the embedded server, started and migrated on demand."""
    run_scenario(project_env(None, MYSITE_DATABASE="embedded", JOBDESK_DATA_DIR=str(data_dir)))


def test_worker_django_refuses_a_database_url_naming_another_database(dsn: str) -> None:
    other = urlsplit(dsn)._replace(path="/postgres").geturl()
    out = subprocess.run([str(django_venv.ensure()), "-m", "jobdesk", "worker", "--django", "mysite.settings"],
                         env=project_env(other, MYSITE_DATABASE_URL=dsn), cwd=PROJECT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("jobdesk: error: DATABASE_URL names postgres on ") and "'default'" in lines[0], lines[0]


def test_worker_django_without_django_says_so_in_one_line(dsn: str) -> None:
    """In the project's own venv (Python 3.11, no Django), --django is refused in one line."""
    out = run_cli("worker", "--django", "mysite.settings", dsn=dsn)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Django 6" in lines[0] and "Traceback" not in out.stderr, out.stderr


def test_worker_django_refuses_a_project_without_a_jobdesk_backend(dsn: str) -> None:
    out = subprocess.run([str(django_venv.ensure()), "-m", "jobdesk", "worker", "--django",
                          "mysite.no_jobdesk_settings"], env=project_env(dsn), cwd=PROJECT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no backend in its TASKS is jobdesk.integrations.django.JobdeskBackend" in lines[0], \
        out.stderr


def test_the_documented_command_prints_the_embedded_databases_entry(data_dir: Path) -> None:
    """docs/django.md's command prints the DATABASES entry it shows, with this data folder's socket
    folder as HOST, and the server it names is running."""
    page = (django_venv.ROOT / "docs" / "django.md").read_text()
    command = page.split("```bash\n", 1)[1].split("\n```", 1)[0]
    shown = page.split(command, 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0]
    assert command.startswith("python -c ")
    argv = [str(django_venv.ensure()), "-c", command.split("'")[1]]
    out = subprocess.run(argv, env=project_env(None, JOBDESK_DATA_DIR=str(data_dir)), cwd=PROJECT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    socket_dir = data_dir / "pg" / "run"
    assert out.stdout.strip() == shown.replace("/home/ada/.local/share/jobdesk/pg/run", str(socket_dir))
    assert EmbeddedServer(data_dir).is_ready()
