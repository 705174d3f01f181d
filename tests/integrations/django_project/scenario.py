"""The Django project's tasks on jobdesk, end to end (run on Python 3.12+ with Django 6, against
DATABASE_URL, from this folder): views enqueue in their transaction, a real `jobdesk worker
--django mysite.settings` runs the tasks, results are read back; a failing task is retried
JOB_RETRY_INTERVALS times. Prints one line per check; exits non-zero at the first that fails."""

import asyncio
import os
import subprocess
import sys
import time
from datetime import timedelta

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
import django

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.tasks import TaskResultStatus, default_task_backend  # noqa: E402
from django.tasks.exceptions import TaskResultDoesNotExist  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402
from shop.tasks import add, always_fails, shout  # noqa: E402

from jobdesk import SyncJobClient  # noqa: E402
from jobdesk.core.errors import JobNotFound  # noqa: E402
from jobdesk.integrations.django import database_url  # noqa: E402


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def finished(task, result_id, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        result = task.get_result(result_id)
        if result.is_finished or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


class Undone(Exception):
    pass


def enqueue_through_djangos_connection():
    """docs/django.md: SyncJobClient's enqueue with `connection=django.db.connection`, in a view's
    transaction: the job exists if and only if that transaction commits."""
    with SyncJobClient.connect(database_url(connection.settings_dict)) as jobs:
        with transaction.atomic():
            kept = jobs.enqueue("echo", {"n": 1}, connection=connection)
        try:
            with transaction.atomic():
                undone = jobs.enqueue("echo", {"n": 2}, connection=connection)
                raise Undone
        except Undone:
            pass
        check("enqueue(..., connection=django.db.connection) writes in Django's transaction",
              jobs.get_job(kept).status == "queued")
        try:
            jobs.get_job(undone)
            check("... and a rolled-back one leaves no job", False)
        except JobNotFound:
            check("... and a rolled-back one leaves no job", True)


def main():
    client = Client()
    committed = client.get("/order/", {"a": 2, "b": 3}).json()
    check("a view's enqueue answers READY", committed["status"] == "READY")
    rolled_back = client.get("/order-that-fails/").json()
    try:
        add.get_result(rolled_back["id"])
        check("a task enqueued in a rolled-back transaction does not exist", False)
    except TaskResultDoesNotExist:
        check("a task enqueued in a rolled-back transaction does not exist", True)
    with transaction.atomic():
        undone = add.enqueue(9, 9)
        transaction.set_rollback(True)
    try:
        add.get_result(undone.id)
        check("a task enqueued in a transaction rolled back by set_rollback does not exist", False)
    except TaskResultDoesNotExist:
        check("a task enqueued in a transaction rolled back by set_rollback does not exist", True)
    try:
        add.enqueue(object(), 1)
        check("arguments that are not JSON fail at enqueue", False)
    except TypeError:
        check("arguments that are not JSON fail at enqueue (Django's TypeError)", True)
    enqueue_through_djangos_connection()
    later = add.using(priority=50, run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 2)
    failing = always_fails.enqueue("socks")
    shouted = asyncio.run(shout.aenqueue("hi"))

    worker = subprocess.Popen([sys.executable, "-m", "jobdesk", "worker", "--django", "mysite.settings"],
                              env={**os.environ, "JOB_RETRY_INTERVALS": "0.2,0.2"})
    try:
        done = finished(add, committed["id"])
        check("the view's task ran: SUCCESSFUL, return value 5",
              done.status == TaskResultStatus.SUCCESSFUL and done.return_value == 5)
        check("its TaskResult has its args, times and one worker",
              done.args == [2, 3] and done.started_at and done.finished_at and done.attempts == 1)
        check("an async task ran through aenqueue", finished(shout, shouted.id).return_value == "HI")
        failed = finished(always_fails, failing.id)
        check("a failing task is tried 3 times (JOB_RETRY_INTERVALS has 2), then FAILED",
              failed.status == TaskResultStatus.FAILED and len(failed.errors) == 3)
        error = failed.errors[-1]
        check("its errors name the exception class and hold the traceback",
              error.exception_class_path == "shop.tasks.OutOfStock" and "no socks left" in error.traceback)
        waiting = add.get_result(later.id)
        check("run_after holds the task: still READY, with its priority",
              waiting.status == TaskResultStatus.READY and waiting.task.priority == 50)
        try:
            default_task_backend.get_result("no-such-id")
            check("an unknown id raises TaskResultDoesNotExist", False)
        except TaskResultDoesNotExist:
            check("an unknown id raises TaskResultDoesNotExist", True)
    finally:
        worker.terminate()
        worker.wait(30)
        default_task_backend.close()
    print("all checks passed")


if __name__ == "__main__":
    main()
