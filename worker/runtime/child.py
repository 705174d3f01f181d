"""The child's side of a processor with `executor = "process"`: what runs in the separate
process. It imports the processor's class by its module path, runs `process` with a `ChildJob`,
and sends the outcome back over its pipe.

This module is what the child imports first, so it imports little: the processor's own module
brings what the processor needs.

The pipe carries tuples. Parent to child: ("cancel",), ("reply", seq, ok, value) and ("stack",),
an operator asking what the processor is doing. Child to parent: ("call", seq, name, args,
kwargs), a method of the job to call in the worker, ("log", fields), a log record, ("stack",
frames), the processor's stack now, and at the end ("done", True, result) or ("done", False,
exception).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import pickle
import queue
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any

from jobdesk.core.sync_job import AwaitableReports, SyncJob

# The fields of a Job a child gets as they are (the rest live in the worker).
JOB_FIELDS = ("id", "type", "input_data", "user_id", "pipeline_id", "retry_count", "attempt", "priority")


class ChildJob(SyncJob):
    """The job of a processor run in a separate process: a SyncJob with its data, `cancelled`,
    and every method (`progress`, `log`...) forwarded to the worker, where it is called on the
    job itself; the call waits for its result, so an error it raises there is raised here."""

    def __init__(self, fields: dict[str, Any], pipe: Connection) -> None:
        self.__dict__.update(fields)
        self._pipe = pipe
        self._send_lock = threading.Lock()
        self._cancelled = threading.Event()
        self._replies: dict[int, queue.SimpleQueue[tuple[bool, Any]]] = {}
        self._seq = 0
        self._awaiting: Any = None  # an async processor's coroutine, while the main thread runs it

    @property
    def cancelled(self) -> bool:
        """True once the job has been cancelled: stop early, and return or raise."""
        return self._cancelled.is_set()

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - any other method of the worker's Job
        if name.startswith("_"):
            raise AttributeError(name)

        def forwarded(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
            return self._call(name, *args, **kwargs)

        forwarded.__name__ = name
        return forwarded

    def _call(self, name: str, *args: object, **kwargs: object) -> Any:  # noqa: ANN401
        answer: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        with self._send_lock:
            self._seq += 1
            seq = self._seq
            self._replies[seq] = answer
            self._pipe.send(("call", seq, name, args, kwargs))
        ok, value = answer.get()
        if not ok:
            raise value
        return value

    def send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            self._pipe.send(message)

    def _send_stack(self) -> None:
        """The processor's stack now: its coroutine's, or the main thread's that runs it."""
        from jobdesk.runtime import stacks  # loaded when first asked: most children never are

        frames = stacks.coroutine_stack(self._awaiting) if self._awaiting is not None else stacks.main_thread_stack()
        try:
            self.send(("stack", frames))
        except (OSError, ValueError):
            pass  # the worker has gone

    def listen(self) -> None:
        """Read what the worker sends until the pipe closes (a daemon thread)."""
        while True:
            try:
                message = self._pipe.recv()
            except (EOFError, OSError):
                return
            if message[0] == "cancel":
                self._cancelled.set()
            elif message[0] == "stack":
                self._send_stack()
            elif message[0] == "reply":
                answer = self._replies.pop(message[1], None)
                if answer is not None:
                    answer.put((message[2], message[3]))


def load_class(module: str, qualname: str) -> type[Any]:
    target: Any = importlib.import_module(module)  # noqa: TID251 - the user's processor
    for part in qualname.split("."):
        target = getattr(target, part)
    return target  # type: ignore[no-any-return]


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
    logged them in its own thread: they reach the worker's log, and what it keeps of a job's."""

    def __init__(self, job: ChildJob) -> None:
        super().__init__()
        self.job = job

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields = dict(record.__dict__)
            trace = _FORMAT.formatException(record.exc_info) if record.exc_info else record.exc_text
            fields.update(msg=record.getMessage(), args=None, exc_info=None, exc_text=trace)
            try:
                pickle.dumps(fields)
            except Exception:  # noqa: BLE001 - an extra that does not pickle: the plain record
                fields = {k: fields[k] for k in ("name", "levelno", "levelname", "msg", "args", "created",
                                                 "pathname", "lineno", "funcName", "exc_text")}
            self.job.send(("log", fields))
        except Exception:  # noqa: BLE001 - logging never fails the job
            self.handleError(record)


def main(pipe: Connection, module: str, qualname: str, fields: dict[str, Any], log_level: int = logging.INFO) -> None:
    """The child process's entry point. `log_level`: the worker's, for the records sent to it."""
    # Ctrl-C in a terminal reaches the whole process group: the worker decides what becomes of
    # its jobs (a first one lets them finish, a second kills this process), not the signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    job = ChildJob(fields, pipe)
    threading.Thread(target=job.listen, name="jobdesk-parent", daemon=True).start()
    root = logging.getLogger()
    root.handlers[:] = [ToWorker(job)]
    root.setLevel(log_level)
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
        job.send(("done", False, portable(exc)))
        return
    try:
        job.send(("done", True, result))
    except Exception as exc:  # noqa: BLE001 - a result that cannot be pickled
        job.send(("done", False, RuntimeError(f"the processor's result cannot be sent to the worker: {exc}")))


async def _awaited(result: Any) -> Any:  # noqa: ANN401
    return await result
