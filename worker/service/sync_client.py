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

from jobdesk.core.settings import Settings
from jobdesk.service.client import JobClient
from jobdesk.service.foreign import sync_writer
from jobdesk.store.db import Database

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
        # The methods made below from JobClient's, each with that method's arguments and result.
        def __getattr__(self, name: str) -> Callable[..., Any]: ...


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
