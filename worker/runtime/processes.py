"""The worker's side of a processor with `executor = "process"`: one child process per run,
started with multiprocessing's "forkserver" ("spawn" where there is none). A plain fork of the
worker, which runs an event loop and threads, may copy a lock another thread holds, and hang; the
fork server is a process of its own, started once, single-threaded, that has imported the
processors' modules, so a child starts in milliseconds instead of importing them again.

A thread of the worker reads the child's pipe: each job method the child calls (`progress`,
`log`...) is called on the real job, on the event loop, and its result sent back; the last
message is the processor's result or error. A cancel of the job is sent to the child, where
`job.cancelled` turns true. A run cancelled (its grace period over) or past its time limit is
killed, and the worker goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import multiprocessing
import sys
import threading
import types
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from typing import Any, cast

from jobdesk.core.job_stack import StackFrame
from jobdesk.core.models import Job
from jobdesk.core.processor import AnyProcessor
from jobdesk.runtime import child
from jobdesk.runtime.stacks import Place
from jobdesk.runtime.threads import JobThreads

# Typed as the spawn context, which every platform has; the fork server's has the same API.
_SPAWN = cast(SpawnContext, multiprocessing.get_context(
    "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"))
JOIN_S = 5.0  # how long the end of a killed child is waited for


def preload(modules: list[str]) -> None:
    """Have the fork server import these modules (those of the processors run in processes)
    when it starts; once it runs, a module it lacks is imported by each child.

    Each child also runs the worker's main module again, as multiprocessing does (as
    `__mp_main__`: the `jobdesk` command's script, `python -m jobdesk.cli`, or a program of the
    user's). The fork server imports what that module imports, so that this costs each child
    the module's own code and no import."""
    set_preload = getattr(_SPAWN, "set_forkserver_preload", None)
    if set_preload is not None:
        set_preload(["jobdesk.runtime.child", *modules, *_main_imports()])


def _main_imports() -> list[str]:
    """The main module, by name when it was run with -m, and the modules its names come from."""
    main = sys.modules.get("__main__")
    if main is None:
        return []
    names = set()
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    if spec_name and not spec_name.endswith("__main__"):
        names.add(spec_name)
    for value in list(vars(main).values()):
        name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        if isinstance(name, str) and name and not name.startswith("__") and name in sys.modules:
            names.add(name)
    return sorted(names)


class ChildDied(Exception):
    """The process running a job ended without sending its outcome."""


class ChildStacks:
    """The stacks asked of a child over its pipe: each question sends ("stack",), and the thread
    that reads the pipe hands the child's answer to every asker waiting."""

    def __init__(self, pipe: Connection, lock: threading.Lock, loop: asyncio.AbstractEventLoop) -> None:
        self.pipe = pipe
        self.lock = lock
        self.loop = loop
        self.waiting: list[asyncio.Future[list[StackFrame]]] = []

    async def ask(self) -> list[StackFrame]:
        answer: asyncio.Future[list[StackFrame]] = self.loop.create_future()
        self.waiting.append(answer)
        try:
            with self.lock:
                self.pipe.send(("stack",))
        except (OSError, ValueError):
            self.waiting.remove(answer)
            return []  # the child is gone: its run is ending
        return await answer

    def answered(self, frames: list[StackFrame]) -> None:
        """From the pipe's reading thread."""
        try:
            self.loop.call_soon_threadsafe(self._settle, frames)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _settle(self, frames: list[StackFrame]) -> None:
        waiting, self.waiting = self.waiting, []
        for answer in waiting:
            if not answer.done():
                answer.set_result(frames)


async def run_in_process(job: Job, processor: AnyProcessor, threads: JobThreads,
                         place: Place | None = None) -> Any:  # noqa: ANN401
    """Run `processor.process(job)` in a child process; return its result or raise its error.
    While it runs, `place` asks the child for its stack."""
    cls = type(processor)
    fields = {name: getattr(job, name) for name in child.JOB_FIELDS}
    ours, theirs = _SPAWN.Pipe(duplex=True)
    level = logging.getLogger().getEffectiveLevel()  # the child sends the records the worker would log
    proc = _SPAWN.Process(target=child.main, name=f"jobdesk-job-{job.id}", daemon=True,
                          args=(theirs, cls.__module__, cls.__qualname__, fields, level))
    send_lock = threading.Lock()
    cancel_sent: asyncio.Task[None] | None = None
    try:
        await threads.run(proc.start)  # spawning writes the child's start-up data: not on the loop
        theirs.close()
        cancel_sent = asyncio.create_task(_send_cancel(job, ours, send_lock), name=f"job-{job.id}-cancel")
        stacks = ChildStacks(ours, send_lock, asyncio.get_running_loop())
        if place is not None:
            place.child = stacks.ask
        ok, value = await threads.run(_serve, ours, send_lock, job, stacks, proc)
    finally:
        if place is not None:
            place.child = None
        if cancel_sent is not None:
            cancel_sent.cancel()
        if proc.is_alive():
            proc.kill()  # cancelled or past its time limit
        await threads.run(_reap, proc, ours)
    if not ok:
        raise value if isinstance(value, Exception) else ChildDied(f"the process running job {job.id} ended: {value!r}")
    return value


async def _send_cancel(job: Job, pipe: Connection, lock: threading.Lock) -> None:
    if job.cancel_event is None:
        return
    await job.cancel_event.wait()
    try:
        with lock:
            pipe.send(("cancel",))
    except OSError:
        pass  # the child is gone already


def _serve(pipe: Connection, lock: threading.Lock, job: Job, stacks: ChildStacks,
           proc: Any) -> tuple[bool, Any]:  # noqa: ANN401 - a multiprocessing process
    """In a worker thread: answer the child's calls until its outcome comes, or it dies."""
    loop = stacks.loop
    while True:
        try:
            message = pipe.recv()
        except (EOFError, OSError):
            proc.join(JOIN_S)
            return False, ChildDied(f"the process running job {job.id} ended without a result "
                                    f"(exit code {proc.exitcode})")
        if message[0] == "done":
            return bool(message[1]), message[2]
        if message[0] == "stack":
            stacks.answered(message[1])
        if message[0] == "log":  # in this thread, in the job's context, as from a thread job
            record = logging.makeLogRecord(message[1])
            logging.getLogger(record.name).handle(record)
        if message[0] == "call":
            _, seq, name, args, kwargs = message
            reply = _apply(job, loop, name, args, kwargs)
            try:
                with lock:
                    pipe.send(("reply", seq, *reply))
            except (OSError, ValueError):
                pass  # the child is gone; the next recv says so


def _apply(job: Job, loop: asyncio.AbstractEventLoop, name: str, args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """Call `job.<name>(*args, **kwargs)` on the event loop, awaiting it if needed."""
    async def call() -> Any:  # noqa: ANN401
        method = getattr(job, name, None)
        if name.startswith("_") or not callable(method):
            raise AttributeError(f"job.{name} is not a method a processor can call from its process")
        result = method(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    try:
        return True, asyncio.run_coroutine_threadsafe(call(), loop).result()
    except Exception as exc:  # noqa: BLE001 - raised again in the child, in the processor
        return False, child.portable(exc)
    except BaseException as exc:  # noqa: BLE001 - a suspension or a cancel does not cross processes
        return False, RuntimeError(f"job.{name} cannot be used from a separate process ({type(exc).__name__})")


def _reap(proc: Any, pipe: Connection) -> None:  # noqa: ANN401 - a multiprocessing process
    proc.join(JOIN_S)
    pipe.close()
    if proc.exitcode is not None:
        proc.close()
