"""Blocking code off the event loop: the worker's job threads, and the `Job` a plain `def`
processor sees from its thread.

The threads are the worker's own, not the loop's default executor: that one has a handful of
threads (fewer than MAX_CONCURRENT_JOBS), and Python joins its threads at exit, so a thread that
never returns (abandoned after its time limit) would keep the process from exiting. These are
daemon threads, kept idle up to the worker's concurrency and made on demand beyond it: a thread
abandoned after its time limit, or one that waits for another (a step run from a processor's
thread), never leaves a job waiting for a free thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from jobdesk.core.models import Job
from jobdesk.core.sync_job import SyncJob

log = logging.getLogger("jobdesk.worker")

T = TypeVar("T")

IDLE_EXIT_S = 60.0  # an idle thread past the worker's concurrency exits after this long

_Work = tuple[Callable[[], Any], Callable[[bool, Any], None]]


class JobThreads:
    """Runs functions in daemon threads and hands their outcome back to the event loop."""

    def __init__(self, keep: int, name: str = "jobdesk-job") -> None:
        self.keep = max(1, keep)  # idle threads kept waiting for work
        self.name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self._closed = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:  # noqa: ANN401 - any arguments fn takes
        """`fn(*args)` in one of the threads, in a copy of the caller's context (so what a
        context variable says in the job's task, its thread sees too). Cancelling the caller
        abandons the call: the thread runs on, and its result is dropped."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[bool, Any]] = loop.create_future()
        context = contextvars.copy_context()

        def deliver(ok: bool, value: Any) -> None:  # noqa: ANN401 - whatever fn returned or raised
            def settle() -> None:
                if not done.done():  # cancelled meanwhile: the late result is ignored
                    done.set_result((ok, value))
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        self._submit((lambda: context.run(fn, *args), deliver))
        ok, value = await done
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def close(self) -> None:
        """Let the idle threads exit; a thread still running ends when its function does."""
        with self._lock:
            self._closed = True
            idle = self._idle
        for _ in range(idle):
            self._work.put(None)

    def _submit(self, work: _Work) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1  # this one is promised to the work just queued
                start = False
            else:
                self._threads += 1
                start = True
        self._work.put(work)
        if start:
            threading.Thread(target=self._serve, name=f"{self.name}-{self._threads}", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                work = self._work.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._idle > self.keep or self._closed:
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            if work is None:
                with self._lock:
                    self._threads -= 1
                return
            fn, deliver = work
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the job's task, which decides
                deliver(False, exc)
            else:
                deliver(True, result)
            del work, fn, deliver
            with self._lock:
                if self._closed or self._idle >= self.keep:
                    self._threads -= 1
                    return
                self._idle += 1


def call_on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
    """Call `fn` on the event loop from another thread, awaiting its result if it is awaitable,
    and return that result (or raise its exception) in the calling thread."""
    async def call() -> Any:  # noqa: ANN401 - whatever fn gives
        result = fn(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    return asyncio.run_coroutine_threadsafe(call(), loop).result()


class ThreadJob(SyncJob):
    """The job a processor's plain `def process` gets in its thread: a SyncJob, the same names
    as a Job without `await`.

    Data (`id`, `input_data`, `attempt`...) and `cancelled` are read from the job itself;
    `progress` and `log`, which record from any thread at once, are called right here, rather
    than wait a turn of the event loop for each report of a tight loop; any other method (`step`,
    `sleep`, `spawn`...) is called on the event loop and its result awaited there, and the thread
    gets that result. A plain function given to `job.step` runs in a thread of its own, as from
    an async processor."""

    __slots__ = ("_job", "_loop")

    def __init__(self, job: Job, loop: asyncio.AbstractEventLoop) -> None:
        object.__setattr__(self, "_job", job)
        object.__setattr__(self, "_loop", loop)

    @property
    def cancelled(self) -> bool:
        """True once an operator has cancelled this job: stop early, and return or raise."""
        return self._job.cancelled

    def progress(self, fraction: float, message: str | None = None) -> None:
        self._job.progress(fraction, message)

    def log(self, message: str, level: str = "INFO") -> None:
        self._job.log(message, level)

    def _call(self, name: str, *args: object, **kwargs: object) -> Any:  # noqa: ANN401 - what the Job's method gives
        return call_on_loop(self._loop, getattr(self._job, name), *args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - whatever the Job has
        # The data, and any other name of the Job (for a BaseProcessor's plain def, which gets
        # this same object): read from the job, or its method called on the event loop.
        value = getattr(self._job, name)
        if name.startswith("_") or not callable(value):
            return value

        def forwarded(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
            return call_on_loop(self._loop, value, *args, **kwargs)

        forwarded.__name__ = name
        return forwarded

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"job.{name} cannot be set from a processor")

    def __repr__(self) -> str:
        return f"ThreadJob({self._job.id!r}, type={self._job.type!r})"
