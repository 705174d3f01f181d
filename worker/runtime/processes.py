"""The worker's side of a processor with `executor = "process"`: each run goes to a child of
the worker's pool (runtime.process_pool), reused from run to run. Children are started with
multiprocessing's "forkserver" ("spawn" where there is none). A plain fork of the worker, which
runs an event loop and threads, may copy a lock another thread holds, and hang; the fork server
is a process of its own, started once, single-threaded, that has imported the processors'
modules, so a child starts in milliseconds instead of importing them again.

A thread of the worker reads the child's pipe while its job runs: each job method the child
calls (`progress`, `log`...) is called on the real job, on the event loop, and its result sent
back; the last message is the processor's result or error. A cancel of the job is sent to the
child, where `job.cancelled` turns true, and a question for the job's stack (`jobdesk stack`),
which the child answers. A run cancelled (its grace period over) or past its
time limit is killed with its child, and the worker goes on; a child that dies fails its run's
attempt with the signal that killed it (`killed by SIGSEGV`), and the next run gets a new one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import multiprocessing
import signal
import sys
import types
from multiprocessing.context import SpawnContext
from typing import Any, cast

from jobdesk.core.job_stack import StackFrame
from jobdesk.core.models import Job
from jobdesk.core.processor import AnyProcessor
from jobdesk.runtime import child
from jobdesk.runtime.process_pool import Child, ProcessPool, Recycling
from jobdesk.runtime.stacks import Place
from jobdesk.runtime.threads import JobThreads

log = logging.getLogger("jobdesk.worker")

# Typed as the spawn context, which every platform has; the fork server's has the same API.
_SPAWN = cast(SpawnContext, multiprocessing.get_context(
    "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"))
JOIN_S = 5.0  # how long the end of a child whose pipe closed is waited for, to read its exit code


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
    """The stacks asked of a run's child: each question sends ("stack", run) on its control pipe,
    and the thread that reads the child's pipe hands the answer to every asker waiting."""

    def __init__(self, worker: Child, run: int, loop: asyncio.AbstractEventLoop) -> None:
        self.worker = worker
        self.run = run
        self.loop = loop
        self.waiting: list[asyncio.Future[list[StackFrame]]] = []

    async def ask(self) -> list[StackFrame]:
        answer: asyncio.Future[list[StackFrame]] = self.loop.create_future()
        self.waiting.append(answer)
        try:
            self.worker.tell(("stack", self.run))
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


def make_pool(recycling: Recycling, keep: int) -> ProcessPool:
    """The pool of a worker that runs `keep` jobs at once."""
    return ProcessPool(_SPAWN, recycling, keep)


async def run_in_process(job: Job, processor: AnyProcessor, threads: JobThreads, pool: ProcessPool,
                         place: Place | None = None) -> Any:  # noqa: ANN401
    """Run `processor.process(job)` in a child of `pool`; return its result or raise its error.
    While it runs, `place` asks the child for its stack."""
    cls = type(processor)
    task = (pool.next_run(), cls.__module__, cls.__qualname__, {name: getattr(job, name) for name in child.JOB_FIELDS},
            pool.wants_memory(job.type))
    worker = pool.take()
    if worker is None:
        # The child sends the records the worker would log; starting it writes its start-up
        # data, which may block: not on the loop.
        worker = await threads.run(pool.start, child.serve, logging.getLogger().getEffectiveLevel())
    pool.running[job.id] = (worker, task[0])  # a cancel of the job is sent to this run (pool.cancel)
    if job.cancelled:
        pool.cancel(job.id)
    stacks = ChildStacks(worker, task[0], asyncio.get_running_loop())
    if place is not None:
        place.child = stacks.ask
    ended = False
    try:
        ok, value, rss = await threads.run(_serve, worker, task, job, stacks)
        ended = True
    finally:
        if place is not None:
            place.child = None
        pool.running.pop(job.id, None)
        if not ended:  # cancelled, or past its time limit: the child is killed
            pool.discard(worker, kill=True)
    if isinstance(value, ChildDied):
        pool.discard(worker, kill=False)
    else:
        worker.runs += 1
        why = pool.must_retire(worker, job.type, rss)
        if why is None:
            pool.give_back(worker)
        else:
            log.info("the process %d that ran job %s is replaced: %s", worker.pid, job.id, why)
            pool.discard(worker, kill=False)
    if not ok:
        raise value
    return value


def _serve(worker: Child, task: tuple[Any, ...], job: Job, stacks: ChildStacks) -> tuple[bool, Any, int | None]:
    """In a worker thread: send the run to the child, then answer its calls until its outcome
    comes (ok, the result or the error, its resident memory if asked), or it dies."""
    run, loop = task[0], stacks.loop
    try:
        worker.pipe.send(("run", *task))
        while True:
            message = worker.pipe.recv()
            kind = message[0]
            if kind == "done" and message[1] == run:
                return bool(message[2]), message[3], message[4]
            if kind == "log" and message[1] == run:  # in this thread, in the job's context, as from a thread job
                record = logging.makeLogRecord(message[2])
                logging.getLogger(record.name).handle(record)
            elif kind == "stack" and message[1] == run:
                stacks.answered(message[2])
            elif kind == "call":
                _, their_run, seq, name, args, kwargs = message
                reply = _apply(job, loop, name, args, kwargs) if their_run == run else \
                    (False, RuntimeError(f"job.{name} was called after the job's run had ended"))
                worker.tell(("reply", seq, *reply))
    except (EOFError, OSError, ValueError):
        worker.proc.join(JOIN_S)
        return False, ChildDied(f"the process running job {job.id} {ended_how(worker.proc.exitcode)}"), None


def ended_how(exitcode: int | None) -> str:
    """`was killed by SIGSEGV`, `exited with code 3 without a result`..."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    if exitcode is None:
        return "closed its pipe without a result"
    return f"exited with code {exitcode} without a result"


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
