"""The child's side of a processor with `executor = "process"`: what runs in each process of the
worker's pool. The process runs one job after another: for each, it imports the processor's
class by its module path (once), makes an instance, runs `process` with a fresh `ChildJob`, and
sends the outcome back over its pipe; then it waits for the next job, until its pipe closes.

This module is what the child imports first, so it imports little: the processor's own module
brings what the processor needs.

Two pipes join it to the worker. On the first, the worker sends ("run", run, module, qualname,
fields, measure), a job to run (`measure`: send the process's resident memory with the outcome),
which the child's main thread reads while it is idle, and the child sends ("call", run, seq, name,
args, kwargs), a method of the job to call in the worker, ("log", run, fields), a log record,
and at the end of each run ("done", run, ok, value, rss), its result or its error. On the
second, read by a thread of the child, the worker sends ("cancel", run), ("reply", seq, ok,
value) and ("stack", run), an operator asking what the processor is doing, which that thread
answers on the first pipe with ("stack", run, frames), the processor's stack now. `run` numbers
the runs of one worker, so that what a thread left behind by an earlier job sends or gets never
reaches the current one.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import itertools
import logging
import os
import pickle
import queue
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from jobdesk.core.sync_job import AwaitableReports, SyncJob

# The fields of a Job a child gets as they are (the rest live in the worker).
JOB_FIELDS = ("id", "type", "input_data", "user_id", "pipeline_id", "retry_count", "attempt", "priority")


class Link:
    """The child's ends of its pipes: sends from any thread, and one thread that reads the
    worker's cancels and replies, handing each reply to the thread that waits for it."""

    def __init__(self, pipe: Connection, control: Connection) -> None:
        self.pipe = pipe
        self.control = control
        self.current: ChildJob | None = None  # the job running now
        self._send_lock = threading.Lock()
        self._replies: dict[int, queue.SimpleQueue[tuple[bool, Any]]] = {}
        self._seq = itertools.count(1)

    def send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            self.pipe.send(message)

    def call(self, run: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:  # noqa: ANN401
        """Call `job.<name>(*args, **kwargs)` in the worker and wait for its result."""
        answer: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        seq = next(self._seq)
        self._replies[seq] = answer
        self.send(("call", run, seq, name, args, kwargs))
        ok, value = answer.get()
        if not ok:
            raise value
        return value

    def listen(self) -> None:
        """Read the worker's cancels and replies until the pipe closes (a daemon thread)."""
        while True:
            try:
                message = self.control.recv()
            except (EOFError, OSError):
                return
            kind = message[0]
            if kind == "cancel":
                job = self.current
                if job is not None and job.run == message[1]:
                    job.cancel()
            elif kind == "reply":
                answer = self._replies.pop(message[1], None)
                if answer is not None:
                    answer.put((message[2], message[3]))
            elif kind == "stack":
                self._send_stack(message[1])

    def _send_stack(self, run: int) -> None:
        """The stack of run `run` now: its coroutine's, or that of the main thread, which runs it;
        no frames once that run has ended (the worker's question still gets its answer)."""
        from jobdesk.runtime import stacks  # loaded when first asked: most children never are

        job = self.current
        frames: list[Any] = []
        if job is not None and job.run == run:
            frames = stacks.coroutine_stack(job._awaiting) if job._awaiting is not None else stacks.main_thread_stack()
        try:
            self.send(("stack", run, frames))
        except (OSError, ValueError):
            pass  # the worker has gone


class ChildJob(SyncJob):
    """The job of a processor run in a separate process: a SyncJob with its data, `cancelled`,
    and every method (`progress`, `log`...) forwarded to the worker, where it is called on the
    job itself; the call waits for its result, so an error it raises there is raised here.
    Each run gets a new one: nothing of a job's is left for the next."""

    def __init__(self, fields: dict[str, Any], link: Link, run: int) -> None:
        self.__dict__.update(fields)
        self._link = link
        self.run = run
        self._cancelled = False
        self._awaiting: Any = None  # an async processor's coroutine, while the main thread runs it

    @property
    def cancelled(self) -> bool:
        """True once the job has been cancelled: stop early, and return or raise."""
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - any other method of the worker's Job
        if name.startswith("_"):
            raise AttributeError(name)

        def forwarded(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
            return self._call(name, *args, **kwargs)

        forwarded.__name__ = name
        return forwarded

    def _call(self, name: str, *args: object, **kwargs: object) -> Any:  # noqa: ANN401
        return self._link.call(self.run, name, args, kwargs)


_classes: dict[tuple[str, str], type[Any]] = {}


def load_class(module: str, qualname: str) -> type[Any]:
    found = _classes.get((module, qualname))
    if found is None:
        target: Any = importlib.import_module(module)  # noqa: TID251 - the user's processor
        for part in qualname.split("."):
            target = getattr(target, part)
        found = _classes[(module, qualname)] = target
    return found


def portable(exc: BaseException) -> Exception:
    """The exception itself if it survives pickling, or a RuntimeError that says what it was
    (also for a KeyboardInterrupt or a SystemExit: in the worker, they would stop it)."""
    if not isinstance(exc, Exception):
        return RuntimeError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 - our own bytes, just made
    except Exception:  # noqa: BLE001 - any failure to pickle or unpickle
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


_FORMAT = logging.Formatter()


class ToWorker(logging.Handler):
    """Sends the child's log records to the worker, which handles them as if its processor had
    logged them in its own thread: they reach the worker's log, and what it keeps of a job's.
    A record logged between jobs, or by a thread an earlier job left, is not sent."""

    def __init__(self, link: Link) -> None:
        super().__init__()
        self.link = link

    def emit(self, record: logging.LogRecord) -> None:
        job = self.link.current
        if job is None:
            return
        try:
            fields = dict(record.__dict__)
            trace = _FORMAT.formatException(record.exc_info) if record.exc_info else record.exc_text
            fields.update(msg=record.getMessage(), args=None, exc_info=None, exc_text=trace)
            try:
                pickle.dumps(fields)
            except Exception:  # noqa: BLE001 - an extra that does not pickle: the plain record
                fields = {k: fields[k] for k in ("name", "levelno", "levelname", "msg", "args", "created",
                                                 "pathname", "lineno", "funcName", "exc_text")}
            self.link.send(("log", job.run, fields))
        except Exception:  # noqa: BLE001 - logging never fails the job
            self.handleError(record)


def serve(pipe: Connection, control: Connection, log_level: int = logging.INFO) -> None:
    """The child process's entry point: run the jobs the worker sends until the pipe closes.
    `log_level`: the worker's, for the records sent to it."""
    # Ctrl-C in a terminal reaches the whole process group: the worker decides what becomes of
    # its jobs (a first one lets them finish, a second kills this process), not the signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    link = Link(pipe, control)
    threading.Thread(target=link.listen, name="jobdesk-parent", daemon=True).start()
    root = logging.getLogger()
    root.handlers[:] = [ToWorker(link)]
    root.setLevel(log_level)
    while True:
        try:
            _, run, module, qualname, fields, measure = pipe.recv()
        except (EOFError, OSError):
            return  # the worker let this process go, or ended
        job = ChildJob(fields, link, run)
        link.current = job
        ok, value = _run(job, module, qualname)
        link.current = None
        rss = resident_memory() if measure else None
        try:
            link.send(("done", run, ok, value, rss))
        except Exception as exc:  # noqa: BLE001 - a result that cannot be pickled
            error = RuntimeError(f"the processor's result cannot be sent to the worker: {exc}")
            link.send(("done", run, False, error, rss))


def _run(job: ChildJob, module: str, qualname: str) -> tuple[bool, Any]:
    try:
        processor = load_class(module, qualname)()
        # Loaded already, by the processor's module: a SyncProcessor gets the SyncJob, and a
        # BaseProcessor the job as it always has (`await job.progress(...)` works there).
        from jobdesk.core.processor import SyncProcessor

        result = processor.process(job if isinstance(processor, SyncProcessor) else AwaitableReports(job))
        if inspect.isawaitable(result):
            job._awaiting = result
            result = asyncio.run(_awaited(result))
    except BaseException as exc:  # noqa: BLE001 - the worker records it as the attempt's error
        return False, portable(exc)
    return True, result


async def _awaited(result: Any) -> Any:  # noqa: ANN401
    return await result


def resident_memory() -> int | None:
    """This process's resident memory in bytes: now on Linux, its peak on other Unix systems;
    None where neither can be read (Windows)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere
