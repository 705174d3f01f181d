"""The worker's pool of processes for `executor = "process"`: children started once and reused,
one job at a time each, as Celery's prefork pool and Dramatiq's processes do.

A child is taken from the idle ones for a run (or started when none is idle), and given back
when its run ends, unless it must be replaced: after JOB_PROCESS_MAX_TASKS runs, or once its
resident memory passes JOB_PROCESS_MAX_MEMORY (each also by type, JOB_TYPE_PROCESS_MAX_TASKS and
JOB_TYPE_PROCESS_MAX_MEMORY, for the type of the job it just ran). A child killed (its job past
its time limit, or cancelled past its grace period) or dead (a segfault, the OOM killer) is not
given back: the next run starts a fresh one. At most as many children live as the worker runs
jobs at once; the idle ones end when the worker stops.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by the worker, which loads multiprocessing only to run processes
    from multiprocessing.connection import Connection
    from multiprocessing.context import SpawnContext

    from jobdesk.core.settings import Settings

JOIN_S = 5.0  # how long the end of a child that is let go, or killed, is waited for


@dataclass(frozen=True)
class Recycling:
    """When a child is replaced after a run: JOB_PROCESS_MAX_TASKS and JOB_PROCESS_MAX_MEMORY,
    and their per-type forms, which win for the type of the job the child just ran."""

    max_tasks: int | None = None
    max_memory: int | None = None  # bytes of resident memory
    type_max_tasks: Mapping[str, int] = field(default_factory=dict)
    type_max_memory: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings) -> Recycling:
        return cls(settings.JOB_PROCESS_MAX_TASKS, settings.JOB_PROCESS_MAX_MEMORY,
                   settings.JOB_TYPE_PROCESS_MAX_TASKS, settings.JOB_TYPE_PROCESS_MAX_MEMORY)

    def tasks_of(self, job_type: str) -> int | None:
        return self.type_max_tasks.get(job_type, self.max_tasks)

    def memory_of(self, job_type: str) -> int | None:
        return self.type_max_memory.get(job_type, self.max_memory)


class Child:
    """One process of the pool, the worker's end of its pipe, and the runs it has done."""

    def __init__(self, proc: Any, pipe: Connection, control: Connection) -> None:  # noqa: ANN401 - a process
        self.proc = proc
        self.pipe = pipe  # runs to the child; its calls, log records and outcomes back
        self.control = control  # cancels and replies to the child
        self.pid: int = proc.pid
        self.runs = 0
        self.control_lock = threading.Lock()  # the job's thread (replies) and the event loop (a cancel) send

    def tell(self, message: tuple[Any, ...]) -> None:
        """Send on the control pipe."""
        with self.control_lock:
            self.control.send(message)

    def end(self, kill: bool) -> None:
        """Let the child go: closing its pipe ends it once its run is over; `kill` ends it now.
        Then wait for its end, in this thread. A killed child's pipe is left to the thread that
        still reads it, which sees it end: closed under that thread, its number could be reused."""
        if kill:
            self.proc.kill()
        else:
            self.pipe.close()
            self.control.close()
        self.proc.join(JOIN_S)
        if self.proc.exitcode is None:  # it did not end when its pipe closed
            self.proc.kill()
            self.proc.join(JOIN_S)
        if self.proc.exitcode is not None:
            self.proc.close()


class ProcessPool:
    """Idle children, kept for the next run; `take` one, then `give_back` or `discard` it."""

    def __init__(self, context: SpawnContext, recycling: Recycling | None = None, keep: int = 1) -> None:
        self.context = context
        self.recycling = recycling or Recycling()
        self.keep = max(1, keep)  # idle children kept at most: the worker's concurrency
        self._idle: list[Child] = []
        self._live: set[Child] = set()  # every child started and not yet let go
        self.running: dict[str, tuple[Child, int]] = {}  # by job id: its child, and the number of its run
        self._runs = itertools.count(1)
        self._closed = False

    def next_run(self) -> int:
        return next(self._runs)

    def take(self) -> Child | None:
        """An idle child that is still alive, or None: then `start` one (in a thread)."""
        while self._idle:
            child = self._idle.pop()
            if child.proc.is_alive():
                return child
            self._end(child, kill=True)  # died while idle: its end is waited for aside
        return None

    def start(self, target: Any, log_level: int) -> Child:  # noqa: ANN401 - child.serve
        """Start a child running `target(pipe, control, log_level)`; it blocks (in a thread,
        not the loop)."""
        ours, theirs = self.context.Pipe(duplex=True)
        control_in, control_out = self.context.Pipe(duplex=False)
        proc = self.context.Process(target=target, name="jobdesk-process", daemon=True,
                                    args=(theirs, control_in, log_level))
        proc.start()
        theirs.close()
        control_in.close()
        started = Child(proc, ours, control_out)
        self._live.add(started)  # ended by `close` even if the run it was for was cancelled meanwhile
        if self._closed:  # the worker stopped while it started
            self._end(started, kill=False)
        return started

    def must_retire(self, child: Child, job_type: str, rss: int | None) -> str | None:
        """Why `child` is replaced after its run of a job of `job_type`, or None to keep it."""
        limit = self.recycling.tasks_of(job_type)
        if limit is not None and child.runs >= limit:
            return f"it has run {child.runs} jobs"
        memory = self.recycling.memory_of(job_type)
        if memory is not None and rss is not None and rss > memory:
            return f"its resident memory, {rss // 1024} KiB, is past {memory // 1024} KiB"
        return None

    def wants_memory(self, job_type: str) -> bool:
        return self.recycling.memory_of(job_type) is not None

    def cancel(self, job_id: str) -> None:
        """Tell the child running this job that it is cancelled: `job.cancelled` turns true there."""
        held = self.running.get(job_id)
        if held is not None:
            try:
                held[0].tell(("cancel", held[1]))
            except (OSError, ValueError):
                pass  # the child is gone already

    def give_back(self, child: Child) -> None:
        if self._closed or len(self._idle) >= self.keep:
            self._end(child, kill=False)
        else:
            self._idle.append(child)

    def discard(self, child: Child, kill: bool) -> None:
        """A child not given back: killed now with `kill` (its run was stopped), else let go."""
        self._end(child, kill=kill)

    def close(self) -> None:
        """Let the idle children go (each ends when its pipe closes); a child still running a
        job is killed or let go when that run ends."""
        self._closed = True
        self._idle = []
        running = {id(child) for child, _ in self.running.values()}
        for child in [c for c in list(self._live) if id(c) not in running]:  # list(): one step, under the GIL
            self._end(child, kill=False)

    def _end(self, child: Child, kill: bool) -> None:
        """End a child, waiting for its end in a thread of its own."""
        self._live.discard(child)
        threading.Thread(target=child.end, args=(kill,), name=f"jobdesk-process-end-{child.pid}", daemon=True).start()
