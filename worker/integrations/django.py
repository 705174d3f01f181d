"""A backend for Django's tasks framework (`django.tasks`, Django 6): Django's `@task` functions
run on jobdesk's workers.

    # settings.py
    TASKS = {"default": {"BACKEND": "jobdesk.integrations.django.JobdeskBackend"}}

    # shop/tasks.py
    @task
    def send_confirmation(order_id: int) -> str: ...

    # a view
    with transaction.atomic():
        order = Order.objects.create(...)
        result = send_confirmation.enqueue(order.id)   # exists only if this transaction commits

    $ jobdesk worker --django mysite.settings          # runs them

A task is a job whose type is the task's module path (`shop.tasks.send_confirmation`) and whose
input is `{"args": [...], "kwargs": {...}}`; its return value is the job's result
(`{"return_value": ...}`). The job is written through Django's own database connection (the
alias `OPTIONS["DATABASE"]`, "default" by default), in the transaction it has open: a task
enqueued inside `transaction.atomic()` exists if and only if that transaction commits. Results
are read through a pool of the backend's own on the same database. Django has no retries of its
own: a task that raises is tried again after each of JOB_RETRY_INTERVALS, then fails.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import re
import sys
import threading
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from django.db import close_old_connections, connections
from django.tasks import TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task, TaskContext, TaskError, TaskResult
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from jobdesk.core.errors import JobdeskError, JobNotFound
from jobdesk.core.models import Job, ProcessorResult, Status
from jobdesk.core.processor import BaseProcessor
from jobdesk.service.foreign import ConnectionKind, register_connection_kind
from jobdesk.service.jobs import JobService
from jobdesk.service.read_models import Attempt, JobDetail
from jobdesk.service.sync_client import SyncJobClient
from jobdesk.store.db import Database, describe
from jobdesk.store.same_database import reach_same_database, same_database

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

# jobdesk's statuses as Django's: a job queued again for a retry is READY, as Django says of a
# task "ready to be executed again"; a cancelled task did not run to its end: FAILED.
STATUSES: dict[Status, TaskResultStatus] = {
    Status.QUEUED: TaskResultStatus.READY,
    Status.IN_PROGRESS: TaskResultStatus.RUNNING,
    Status.WAITING_APPROVAL: TaskResultStatus.RUNNING,
    Status.COMPLETED: TaskResultStatus.SUCCESSFUL,
    Status.FAILED: TaskResultStatus.FAILED,
    Status.CANCELLED: TaskResultStatus.FAILED,
}
# The exception line that ends a traceback: `module.Class: message`, or `Class` alone.
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def driver_connection(connection: object) -> object | None:
    """The psycopg connection under a Django database connection (opened if it is not yet), in
    the transaction Django has open; None when `connection` is not one. `django.db.connection`,
    a proxy to the default alias's connection of the calling thread, is that connection."""
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.utils.connection import ConnectionProxy

    if isinstance(connection, ConnectionProxy):  # a database connection's proxy has its alias
        alias = getattr(connection, "alias", None)
        connection = connections[alias] if isinstance(alias, str) and alias in connections.settings else None
    if not isinstance(connection, BaseDatabaseWrapper):
        return None
    connection.ensure_connection()
    return connection.connection


# SyncJobClient's connection= takes Django's connection (loaded by the entry point `jobdesk.connections: django`).
register_connection_kind("django", ConnectionKind(sync_driver=driver_connection))


class _SyncService(SyncJobClient):
    """The backend's client: a `JobService`, whose job details hold the failed attempts."""

    client: JobService
    client_class = JobService


class JobdeskBackend(BaseTaskBackend):
    """Django's task backend on jobdesk: enqueue (and `aenqueue`), `using(priority=..., run_after=...)`,
    `get_result`. Priorities (-100 to 100) are jobdesk's as they are: higher runs sooner."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.database = self.options.get("DATABASE", "default")
        self._client: _SyncService | None = None
        self._lock = threading.Lock()

    def client(self) -> _SyncService:
        """The backend's client on the database of its alias, connected on first use."""
        with self._lock:
            if self._client is None:
                url = database_url(connections[self.database].settings_dict)
                self._client = _SyncService.connect(_database_at(url), source="django")
            return self._client

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:  # noqa: ANN401 - Django's own
        self.validate_task(task)
        # Built first: arguments that are not JSON are refused here, with Django's error.
        result = TaskResult(task=task, id=str(uuid.uuid4()), status=TaskResultStatus.READY, enqueued_at=None,
                            started_at=None, finished_at=None, last_attempted_at=None, args=args, kwargs=kwargs,
                            backend=self.alias, errors=[], worker_ids=[])
        jobs = self.client()
        jobs.enqueue(task.module_path, {"args": result.args, "kwargs": result.kwargs}, id=result.id,
                     priority=task.priority, scheduled_at=task.run_after, connection=connections[self.database])
        return result

    def get_result(self, result_id: str) -> TaskResult:
        jobs = self.client()
        try:
            detail = jobs._call(jobs.client.job_detail(str(result_id)))
        except JobNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        try:
            task = import_string(detail.job.type)
        except ImportError:
            task = None
        if not isinstance(task, Task):  # a job that is not a task
            raise TaskResultDoesNotExist(result_id)
        return task_result(task, detail, self.alias)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def task_result(task: Task, detail: JobDetail, backend: str) -> TaskResult:
    """A job, with its failed attempts, as Django's TaskResult."""
    job = detail.job
    failed = [a for a in detail.attempts if a.outcome not in ("cancelled",)]
    workers = [a.worker_id or "" for a in failed]
    if job.status in (Status.IN_PROGRESS, Status.COMPLETED) or (job.status == Status.FAILED and not failed):
        workers.append(job.worker_id or "")
    status = STATUSES[job.status]
    result = TaskResult(task=task.using(priority=job.priority, run_after=job.scheduled_at), id=job.id,
                        status=status, enqueued_at=job.created_at, started_at=job.started_at,
                        finished_at=job.completed_at if status in (TaskResultStatus.SUCCESSFUL,
                                                                   TaskResultStatus.FAILED) else None,
                        last_attempted_at=job.started_at, args=job.input_data.get("args", []),
                        kwargs=job.input_data.get("kwargs", {}), backend=backend,
                        errors=[task_error(a) for a in failed if a.traceback or a.error_message],
                        worker_ids=workers)
    if status == TaskResultStatus.SUCCESSFUL and isinstance(job.result_data, dict):
        object.__setattr__(result, "_return_value", job.result_data.get("return_value"))
    return result


def task_error(attempt: Attempt) -> TaskError:
    """A failed attempt as Django's TaskError: the exception's class path, from the traceback's
    last exception line (a built-in exception's as `builtins.Name`), and the traceback."""
    trace = attempt.traceback or attempt.error_message or ""
    path = "builtins.Exception"
    for line in reversed(trace.splitlines()):
        match = _EXCEPTION_LINE.match(line)
        if match and line.strip() and not line.startswith(" "):
            path = match.group(1) if "." in match.group(1) else f"builtins.{match.group(1)}"
            break
    return TaskError(exception_class_path=path, traceback=trace)


def database_url(settings: dict[str, Any]) -> str:
    """A Django PostgreSQL database's settings (NAME, USER, PASSWORD, HOST, PORT) as a URL."""
    user = quote(settings.get("USER") or "", safe="")
    password = quote(settings.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else f"{user}@" if user else ""
    host, port, name = settings.get("HOST") or "", settings.get("PORT") or "", quote(settings.get("NAME") or "")
    if host.startswith("/"):  # a Unix socket's folder
        return f"postgresql://{auth}/{name}?host={quote(host, safe='/')}" + (f"&port={port}" if port else "")
    return f"postgresql://{auth}{host or 'localhost'}{f':{port}' if port else ''}/{name}"


def embedded_database() -> dict[str, str]:
    """A `DATABASES` entry for jobdesk's embedded PostgreSQL, this user's (in JOBDESK_DATA_DIR, or
    the default data folder), started now if nobody runs it yet, as every jobdesk door starts it:

        DATABASES = {"default": embedded_database()}
    """
    from jobdesk.embedded.server import DATABASE, PORT, embedded_server

    server = embedded_server()
    server.ensure_running()
    return {"ENGINE": "django.db.backends.postgresql", "NAME": DATABASE, "USER": "postgres",
            "HOST": str(server.socket_dir), "PORT": str(PORT)}


def _database_at(url: str) -> Database | str:
    """The embedded server when `url` is its address (so that it is started, and migrated, as
    by every door), otherwise the URL as it is. Nothing is done to know (as root, the server's
    user is not looked up, let alone created)."""
    from jobdesk.embedded.server import dsn_at, socket_dir_of

    return Database.embedded_default() if same_database(url, dsn_at(socket_dir_of())) else url


async def worker_database(settings_module: str, settings: Settings) -> Database:
    """What `jobdesk worker --django` runs on: the database of the project's jobdesk task backends
    (their `OPTIONS["DATABASE"]`), the one their tasks are written to. DATABASE_URL, when set, must
    name that same database (by its URL, or else as both servers answer: Django through PgBouncer
    and the worker straight to PostgreSQL, say), and is then used as it is, with
    DATABASE_LISTEN_URL and the rest; otherwise JobdeskError, in one line: a worker on another
    database would never see the tasks."""
    from django.conf import settings as django_settings
    from django.tasks import task_backends
    from django.utils.connection import ConnectionDoesNotExist

    backends = [task_backends[name] for name in getattr(django_settings, "TASKS", {})]
    aliases = sorted({b.database for b in backends if isinstance(b, JobdeskBackend)})
    if not aliases:
        raise JobdeskError(f"--django {settings_module}: no backend in its TASKS is "
                           f"jobdesk.integrations.django.JobdeskBackend, so it has no tasks to run here")
    try:
        urls = {alias: database_url(connections[alias].settings_dict) for alias in aliases}
    except ConnectionDoesNotExist as exc:
        raise JobdeskError(f"--django {settings_module}: TASKS names a database that DATABASES has not: "
                           f"{exc}") from None
    alias, url = aliases[0], urls[aliases[0]]
    for other in aliases[1:]:
        if not same_database(urls[other], url):
            raise JobdeskError(f"--django {settings_module}: its jobdesk task backends write to two databases, "
                               f"{alias!r} and {other!r}; one worker runs on one of them")
    if settings.DATABASE_URL:
        given = settings.DATABASE_URL
        if not (same_database(given, url) or await reach_same_database(given, url)):
            raise JobdeskError(f"DATABASE_URL names {describe(settings.DATABASE_URL)}, but the tasks of "
                               f"{settings_module} are written to its database {alias!r}, {describe(url)}; "
                               f"unset DATABASE_URL, or make it name that database")
        return Database.given(settings.DATABASE_URL, settings)
    chosen = _database_at(url)
    return chosen if isinstance(chosen, Database) else Database.given(chosen)


class DjangoTaskProcessor(BaseProcessor):
    """Runs one Django task: a sync function on a thread (closing the thread's stale database
    connections around it, as Django does around a request), a coroutine function as it is."""

    def __init__(self, task: Task) -> None:
        self.task = task

    async def process(self, job: Job) -> ProcessorResult:
        args, kwargs = list(job.input_data.get("args", [])), dict(job.input_data.get("kwargs", {}))
        if self.task.takes_context:
            running = TaskResult(task=self.task, id=job.id, status=TaskResultStatus.RUNNING, enqueued_at=None,
                                 started_at=None, finished_at=None, last_attempted_at=None, args=args,
                                 kwargs=kwargs, backend=self.task.backend, errors=[],
                                 worker_ids=[""] * job.attempt)
            args.insert(0, TaskContext(task_result=running))
        if inspect.iscoroutinefunction(self.task.func):
            value = await self.task.func(*args, **kwargs)
        else:
            value = await asyncio.to_thread(self._call, args, kwargs)
        return ProcessorResult({"return_value": normalize_json(value)})

    def _call(self, args: list[Any], kwargs: dict[str, Any]) -> Any:  # noqa: ANN401 - the task's result
        close_old_connections()
        try:
            return self.task.func(*args, **kwargs)
        finally:
            close_old_connections()


def django_processors(settings_module: str) -> dict[str, BaseProcessor]:
    """Set Django up with `settings_module` (the current folder first on the import path, as for
    --processors) and a processor for each task of a backend of jobdesk's, found in the `tasks`
    module of every installed app, by its module path."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    os.environ["DJANGO_SETTINGS_MODULE"] = settings_module
    import django
    from django.apps import apps

    django.setup()
    found: dict[str, BaseProcessor] = {}
    for app in apps.get_app_configs():
        try:
            module = importlib.import_module(f"{app.name}.tasks")  # noqa: TID251 - the project's apps
        except ModuleNotFoundError as exc:
            if exc.name != f"{app.name}.tasks":
                raise
            continue
        for value in vars(module).values():
            if isinstance(value, Task) and isinstance(value.get_backend(), JobdeskBackend):
                found[value.module_path] = DjangoTaskProcessor(value)
    return found


__all__ = ["JobdeskBackend", "database_url", "django_processors", "driver_connection", "embedded_database",
           "worker_database"]
