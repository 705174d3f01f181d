"""`SyncJobClient`: `JobClient` for code without an event loop (Django and Flask views, scripts,
notebooks), with the same methods, arguments and results.

    with SyncJobClient.connect() as jobs:                  # DATABASE_URL, or the embedded default
        job_id = jobs.enqueue("echo", {"hello": "world"})
        record = jobs.wait(job_id, timeout=30)

The client owns an event loop that runs on a thread of its own; each call hands its coroutine to
that loop and blocks until it is done. So it also works in a thread that already runs an event
loop (a notebook's, an async view's): that loop is never touched, and no call waits on it.
`connection=` takes the application's sync connection (psycopg 3 `Connection`, SQLAlchemy
`Session`, Django's connection), opened up in the calling thread (see `jobdesk.service.foreign`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from jobdesk.service.client import JobClient
from jobdesk.service.foreign import sync_writer
from jobdesk.store.db import Database

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from datetime import datetime

    from jobdesk.core.input_validation import Validator
    from jobdesk.core.json_value import JsonValue
    from jobdesk.core.models import JobCreate, JobRecord, Status
    from jobdesk.core.settings import Settings
    from jobdesk.service.replica import ReplicaLag
    from jobdesk.store.jobs import JobFilter

_T = TypeVar("_T")


class _LoopThread:
    """An event loop running on a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="jobdesk-sync-client", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on the loop; block until it is done. Interrupted (Ctrl-C), it is cancelled."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a SyncJobClient cannot be called from its own event loop")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class SyncJobClient:
    """`JobClient`'s methods as plain calls: `enqueue`, `enqueue_many`, `create_pipeline`, `get_job`,
    `wait`, `run`, `cancel`, `retry`, `approve`, `reject`, `emit_event`, ... (each is the async
    client's method of the same name, with its arguments and its result). Close it (or use it in
    `with`) to close its pool and stop its thread."""

    client_class: ClassVar[type[JobClient]] = JobClient  # what `connect` makes, on the loop's thread

    def __init__(self, client: JobClient, runner: _LoopThread, *, owner: bool = True) -> None:
        self.client = client
        self._runner = runner
        self._owner = owner  # a view made by `as_actor` shares its parent's pool and thread

    @classmethod
    def connect(cls, database: Database | str | None = None, *, settings: Settings | None = None,
                source: str = "api", pool_size: int | None = None, plan_each_call: bool = False,
                indexes_only: bool = False, read_replica: bool = False) -> Self:
        """A client on `database`, as `JobClient.connect` (the same arguments): DATABASE_URL, or
        the embedded default, when None. DatabaseUnavailable when it cannot be reached."""
        runner = _LoopThread()
        try:
            client = runner.call(cls.client_class.connect(
                database, settings=settings, source=source, pool_size=pool_size, plan_each_call=plan_each_call,
                indexes_only=indexes_only, read_replica=read_replica))
        except BaseException:
            runner.stop()
            raise
        return cls(client, runner)

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self._runner.call(coro)

    def as_actor(self, actor: Any, *, user_id: int | None = None) -> Self:  # noqa: ANN401 - an Actor
        """The same client for another actor (see `JobClient.as_actor`), on the same pool and thread."""
        return type(self)(self.client.as_actor(actor, user_id=user_id), self._runner, owner=False)

    def on_primary(self) -> Self:
        """The same client with every read on the primary (see `JobClient.on_primary`)."""
        return type(self)(self.client.on_primary(), self._runner, owner=False)

    def terminate(self) -> None:
        """Drop every connection now (the database went away)."""
        self._runner.loop.call_soon_threadsafe(self.client.terminate)

    def close(self) -> None:
        """Close the pool (and the listen connection, if a wait opened it), then stop the thread."""
        if not self._owner or self._runner.loop.is_closed():
            return
        try:
            self._call(self.client.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    if TYPE_CHECKING:
        # The methods made below from JobClient's, each with that method's arguments and its result
        # without `await`, for type checkers (tests/integrations/test_sync_client_types.py keeps them so).
        def enqueue(self, type: str, input_data: dict[str, Any], *, depends_on: Sequence[str] = (),
                    user_id: int | None = None, pipeline_id: str | None = None, priority: int = 0,
                    id: str | None = None, scheduled_at: datetime | None = None, unique_key: str | None = None,
                    debounce: float | None = None, debounce_max: float | None = None,
                    connection: object | None = None) -> str: ...
        def place(self, job: JobCreate, *, connection: object | None = None) -> tuple[str, str]: ...
        def enqueue_many(self, jobs: Sequence[JobCreate], *, connection: object | None = None) -> list[str]: ...
        def create_pipeline(self, jobs: Sequence[JobCreate], *, pipeline_id: str | None = None,
                            connection: object | None = None) -> str: ...
        def get_job(self, job_id: str) -> JobRecord: ...
        def job_records(self, job_ids: Sequence[str]) -> list[JobRecord]: ...
        def job_records_page(self, filt: JobFilter, *, before_seq: int | None = None,
                             limit: int = 50) -> tuple[list[JobRecord], int | None]: ...
        def list_jobs(self, *, status: Status | str | None = None, type: str | None = None,
                      pipeline_id: str | None = None, limit: int = 50) -> list[JobRecord]: ...
        def wait(self, job_id: str, *, timeout: float | None = None) -> JobRecord: ...
        def wait_many(self, job_ids: Sequence[str], *, timeout: float | None = None) -> list[JobRecord]: ...
        def run(self, type: str, input_data: dict[str, Any], *, timeout: float | None = None,
                depends_on: Sequence[str] = (), user_id: int | None = None, pipeline_id: str | None = None,
                priority: int = 0, id: str | None = None, scheduled_at: datetime | None = None,
                unique_key: str | None = None) -> JobRecord: ...
        def cancel(self, job_ids: Sequence[str]) -> list[str]: ...
        def cancel_pipeline(self, pipeline_id: str) -> list[str]: ...
        def retry(self, job_ids: Sequence[str], *, fresh: bool = False) -> list[str]: ...
        def retry_plan(self, job_ids: Sequence[str]) -> list[dict[str, Any]]: ...
        def retry_downstream(self, job_ids: Sequence[str]) -> list[str]: ...
        def retry_pipeline(self, pipeline_id: str) -> list[str]: ...
        def retry_with_input(self, job_id: str, input_data: dict[str, Any], *, fresh: bool = False,
                             validate: Validator | None = None) -> list[str]: ...
        def approve(self, job_ids: Sequence[str]) -> list[str]: ...
        def reject(self, job_ids: Sequence[str], reason: str) -> list[str]: ...
        def emit_event(self, key: str, payload: JsonValue = None) -> bool: ...
        def fence_reads(self, *, wait: float = 0.5) -> bool: ...
        def notify(self, channel: str, payload: str) -> None: ...
        def replica_lag(self) -> ReplicaLag | None: ...
        def unserved_warnings(self, job_types: Iterable[str]) -> dict[str, str]: ...


def _blocking(name: str, method: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """JobClient's coroutine method `name` as a blocking call; an application connection given
    as `connection=` is opened up here, in the calling thread."""

    @functools.wraps(method)
    def call(self: SyncJobClient, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - the method's own
        if kwargs.get("connection") is not None:
            kwargs["connection"] = sync_writer(kwargs["connection"])
        return self._call(getattr(self.client, name)(*args, **kwargs))

    return call


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The public methods of a client class, by name (`connect` included)."""
    return {name: member for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and (inspect.isfunction(member) or inspect.ismethod(member))}


for _name, _method in public_methods(JobClient).items():
    if _name not in vars(SyncJobClient) and inspect.iscoroutinefunction(_method):
        setattr(SyncJobClient, _name, _blocking(_name, _method))


__all__ = ["SyncJobClient"]
