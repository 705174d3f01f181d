"""jobdesk as a backend developer gets it: the built wheel, core extra only, in a virtual
environment of its own outside the checkout, used from an empty folder of their project. The wheel
is built from a clone whose links are plain files (`git clone -c core.symlinks=false`, as on Windows
without Developer Mode): the build reads the real folders, worker/ and desktop/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from jobdesk.embedded.server import EmbeddedServer
from tests import pg
from tests.packaging.source_tree import clone_without_links

WHEELHOUSE = Path(sys.prefix) / "wheelhouse"  # filled by `make test` (pip download .)

# The project's own modules named `worker` and `desktop`, as many job projects have: jobdesk's one
# import package is `jobdesk`, so they stay the project's own.
OWN_MODULES = {"worker.py": 'ROLE = "the project\'s worker"\n', "desktop.py": 'ROLE = "the project\'s desktop"\n'}

PROCESSOR = '''
import desktop
import worker

from jobdesk import BaseProcessor, Job, ProcessorResult


class Shout(BaseProcessor):
    async def process(self, job: Job) -> ProcessorResult:
        return ProcessorResult({"said": job.input_data["text"].upper(), "worker": worker.ROLE,
                                "desktop": desktop.ROLE})


PROCESSOR_MAP = {"myproject.shout": Shout}
'''


# A user's module with an async processor, a thread processor and a process processor, each using
# the job's methods: it must pass `mypy --strict` against the installed wheel, with no ignores.
TYPED_PROCESSORS = '''
from __future__ import annotations

import time

from pydantic import BaseModel

from jobdesk import (BaseProcessor, Job, JobClient, JobCreate, JobRecord, PermanentJobError, ProcessorResult,
                     Schedule, SyncJob, SyncJobClient, SyncProcessor)


class Page(BaseModel):
    url: str


class Fetched(BaseModel):
    n: int


def fetch(url: str) -> str:
    return url.upper()


class Crawl(BaseProcessor):
    input_model = Page
    timeout = 30

    async def process(self, job: Job) -> ProcessorResult:
        if job.cancelled:
            raise PermanentJobError("cancelled")
        await job.progress(0.5, "half")
        job.log("a line")
        body = await job.step("fetch", fetch, job.input_data["url"])
        ids = await job.spawn([JobCreate("render", {"body": body})])
        done: list[JobRecord] = await job.wait_for_jobs(ids, timeout=60)
        payload = await job.wait_for_event("approved")
        first: bool = await job.emit_event("crawled", {"id": job.id})
        await job.sleep(1)
        return ProcessorResult({"done": len(done), "payload": payload, "first": first})


class Fetch(SyncProcessor):
    input_model = Page
    output_model = Fetched
    timeout = 10.5

    def process(self, job: SyncJob) -> ProcessorResult:
        job.progress(0.1, "starting")
        job.log("from a thread", "WARNING")
        body = job.step("fetch", fetch, job.input_data["url"])
        ids: list[str] = job.spawn([JobCreate("render", {"body": body})])
        records: list[JobRecord] = job.wait_for_jobs(ids)
        event = job.wait_for_event("approved", timeout=5)
        job.sleep(0.5)
        sent: bool = job.emit_event("fetched")
        return ProcessorResult({"n": len(records), "event": event, "sent": sent, "attempt": job.attempt,
                                "cancelled": job.cancelled, "user": job.user_id, "pipeline": job.pipeline_id})


class Render(SyncProcessor):
    executor = "process"

    def process(self, job: SyncJob) -> ProcessorResult:
        total = 0
        for i in range(1000):
            if job.cancelled:
                break
            total += i
            job.progress(i / 1000)
        job.log(f"rendered {total} in {time.monotonic()}")
        return ProcessorResult({"total": total, "type": job.type, "retries": job.retry_count})


PROCESSOR_MAP = {"crawl": Crawl, "fetch": Fetch, "render": Render}
SCHEDULES = [Schedule(name="nightly", type="crawl", cron="0 2 * * *", input_data={"url": "x"})]


async def enqueue() -> str:
    async with await JobClient.connect() as jobs:
        return await jobs.enqueue("crawl", {"url": "https://example.org"})


def enqueue_sync() -> str:
    with SyncJobClient.connect() as jobs:
        record: JobRecord = jobs.run("fetch", {"url": "https://example.org"}, timeout=30)
        return jobs.enqueue("render", {"from": record.id})
'''


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtual environment with the wheel built from this checkout, cloned without its
    links, core extra only."""
    work = tmp_path_factory.mktemp("wheel")
    source = clone_without_links(work / "source")
    if not WHEELHOUSE.is_dir():
        done = _run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(WHEELHOUSE), str(source)])
        assert done.returncode == 0, done.stderr
    built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                  "-w", str(work / "dist"), str(source)])
    assert built.returncode == 0, built.stderr
    wheel = next((work / "dist").glob("jobdesk-*.whl"))
    env_dir = work / "env"
    # No pip of its own (its copy into the venv took longer than the install): ours installs into it.
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)])
    assert made.returncode == 0, made.stderr
    pip = _run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "--quiet",
                "--no-index", "--find-links", str(WHEELHOUSE), str(wheel)])
    assert pip.returncode == 0, pip.stderr
    yield env_dir / "bin"


@pytest.fixture
async def empty_database(pg_server: EmbeddedServer) -> object:
    """A database with nothing in it: no schema, as a new project's would be."""
    name = f"jdwheel_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    conn = await asyncpg.connect(pg.with_database(pg_server.dsn, "postgres"))
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    url = pg.with_database(pg_server.dsn, name)
    yield url
    await pg.drop_test_database(url)


def _project_env(database_url: str | None, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "JOBDESK_")) and k != "DATABASE_URL"}
    env.update(HOME=str(home), JOB_PROCESSOR_POLL_INTERVAL="0.2")
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return env


def _make_project(root: Path) -> Path:
    """A project folder with its own worker.py and desktop.py, and its processors in app/procs.py."""
    project = root / "myproject"
    (project / "app").mkdir(parents=True)
    for name, text in OWN_MODULES.items():
        (project / name).write_text(text)
    (project / "app" / "__init__.py").write_text("")
    (project / "app" / "procs.py").write_text(PROCESSOR)
    return project


def _run_a_job(installed: Path, project: Path, env: dict[str, str]) -> dict[str, object]:
    """jobdesk migrate, submit, then jobdesk worker --processors app.procs until the job is done."""
    jobdesk = str(installed / "jobdesk")
    migrated = _run([jobdesk, "migrate", "--json"], cwd=project, env=env)
    assert migrated.returncode == 0, migrated.stderr
    assert len(json.loads(migrated.stdout)["applied"]) >= 16

    submitted = _run([jobdesk, "submit", "myproject.shout", "--input", '{"text": "hi"}', "--json"],
                     cwd=project, env=env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]

    worker = subprocess.Popen([jobdesk, "worker", "--processors", "app.procs"], cwd=project, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        shown: dict[str, object] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and shown.get("status") != "completed":
            assert worker.poll() is None, worker.communicate()[0]
            done = _run([jobdesk, "show", job_id, "--json"], cwd=project, env=env)
            assert done.returncode == 0, done.stderr
            shown = json.loads(done.stdout)
            time.sleep(0.3)
    finally:
        worker.terminate()
        log = worker.communicate(timeout=30)[0]
    assert shown.get("status") == "completed", log
    return shown


def test_the_wheel_puts_one_import_package_on_the_path(installed: Path, tmp_path: Path) -> None:
    site = next((installed.parent / "lib").glob("python3*/site-packages"))
    ours = {p.name for p in site.iterdir() if p.name.startswith("jobdesk") or p.name in ("worker", "desktop")}
    assert ours == {"jobdesk", f"jobdesk-{_version(installed)}.dist-info"}, ours
    record = next(site.glob("jobdesk-*.dist-info")).joinpath("RECORD").read_text()
    paths = [line.split(",", 1)[0] for line in record.splitlines()]
    tops = {p.split("/", 1)[0] for p in paths if "/" in p and not p.startswith("..")}  # ../../../bin/jobdesk
    assert tops == {"jobdesk", f"jobdesk-{_version(installed)}.dist-info"}, tops
    env = _project_env(None, tmp_path)
    for argv in ([str(installed / "jobdesk"), "--version"], [str(installed / "python"), "-m", "jobdesk", "--version"]):
        done = _run(argv, cwd=tmp_path, env=env)
        assert done.returncode == 0 and done.stdout.strip().endswith(_version(installed)), (argv, done)


def _version(installed: Path) -> str:
    done = _run([str(installed / "python"), "-c", "import jobdesk; print(jobdesk.__version__)"])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_a_project_with_its_own_worker_module_runs_a_job_on_database_url(
        installed: Path, empty_database: str, tmp_path: Path) -> None:
    project = _make_project(tmp_path)
    env = _project_env(empty_database, tmp_path)

    no_qt = _run([str(installed / "python"), "-c", "import importlib.util as u; print(u.find_spec('PySide6'))"],
                 cwd=project, env=env)
    assert no_qt.stdout.strip() == "None", "the core install must not bring Qt"
    own = _run([str(installed / "python"), "-c", "import worker, desktop; print(worker.ROLE, '|', desktop.ROLE)"],
               cwd=project, env=env)
    assert own.stdout.strip() == "the project's worker | the project's desktop", own.stderr

    shown = _run_a_job(installed, project, env)
    assert shown["result_data"] == {"said": "HI", "worker": "the project's worker",
                                    "desktop": "the project's desktop"}


def test_a_project_with_its_own_worker_module_runs_a_job_on_the_embedded_database(
        installed: Path, tmp_path: Path) -> None:
    project = _make_project(tmp_path)
    data_dir = Path(tempfile.mkdtemp(prefix="jdwheel-emb-"))
    data_dir.chmod(0o755)  # the embedded server's own user reaches its folder
    env = {**_project_env(None, tmp_path), "JOBDESK_DATA_DIR": str(data_dir), "JOBDESK_EMBEDDED_IDLE_STOP": "60s"}
    try:
        shown = _run_a_job(installed, project, env)
        assert shown["result_data"] == {"said": "HI", "worker": "the project's worker",
                                        "desktop": "the project's desktop"}
        status = _run([str(installed / "jobdesk"), "db", "status", "--json"], cwd=project, env=env)
        assert json.loads(status.stdout)["running"] is True, status.stdout
    finally:
        _run([str(installed / "jobdesk"), "db", "stop", "--force"], cwd=project, env=env)
        EmbeddedServer(data_dir).stop()
        subprocess.run(["rm", "-rf", str(data_dir)], check=False)


def test_the_core_install_names_the_extra_a_command_needs(installed: Path, tmp_path: Path) -> None:
    env = _project_env("postgresql://nobody@127.0.0.1:1/none?sslmode=disable", tmp_path)
    api = _run([str(installed / "jobdesk"), "api"], cwd=tmp_path, env=env)
    assert api.returncode == 1
    assert api.stderr.strip() == "jobdesk api needs the api extra: pip install 'jobdesk[api]'"
    console = _run([str(installed / "jobdesk")], cwd=tmp_path, env={**env, "QT_QPA_PLATFORM": "offscreen"})
    assert console.returncode == 1
    assert console.stderr.strip() == "the jobdesk console needs the console extra: pip install 'jobdesk[console]'"


async def test_migrate_without_migration_files_fails_in_one_line(installed: Path, empty_database: str,
                                                                  tmp_path: Path) -> None:
    site = next((installed.parent / "lib").glob("python3*/site-packages"))
    hidden = site / "jobdesk" / "sql-hidden"
    (site / "jobdesk" / "sql").rename(hidden)
    try:
        done = _run([str(installed / "jobdesk"), "migrate"], cwd=tmp_path, env=_project_env(empty_database, tmp_path))
    finally:
        hidden.rename(site / "jobdesk" / "sql")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no migration files found" in lines[0], done.stderr
    assert "up to date" not in done.stdout


def test_a_users_processors_pass_mypy_strict_against_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    """The wheel ships py.typed and typed processor APIs: `class Fetch(BaseProcessor)` is no
    subclass of Any, a plain def process is a SyncProcessor's, and its job's calls are plain."""
    (tmp_path / "procs.py").write_text(TYPED_PROCESSORS)
    (tmp_path / "mypy.ini").write_text("[mypy]\n")  # the defaults, whatever a home folder says
    checked = _run([sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini", "--cache-dir", ".cache",
                    "--python-executable", str(installed / "python"), "procs.py"],
                   cwd=tmp_path, env=_project_env(None, tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("Success: no issues found in 1 source file"), checked.stdout
