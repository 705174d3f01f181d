"""Taking a running job's stack, wherever its code runs: the coroutines its task awaits (on the
loop), the thread that runs a plain `def` processor, or the child process of one run in a process
(which takes its own stack when asked over its pipe, see `runtime.child`).

The frames go outermost first, as a traceback prints them. The worker's own frames above the
processor (the task's plumbing, a thread's or a child's start-up) are left out: the stack starts
where the processor's code does. This module imports the standard library and the core only, so
a child process can load it cheaply when it is first asked.
"""

from __future__ import annotations

import asyncio
import gc
import linecache
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from jobdesk.core.job_stack import StackFrame

MAX_FRAMES = 200  # a stack deeper than this keeps its innermost frames
CHILD_ANSWER_S = 2.0  # a child process that has not answered by then (still starting) gets the worker's side

_RUNTIME = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB = os.path.dirname(os.path.abspath(threading.__file__)) + os.sep
# The start-up frames of a thread, a task or a child process: before the processor's code (and
# `<string>`, the fork server's command line, or `<frozen runpy>`).
_PLUMBING = (_RUNTIME, _STDLIB + "threading.py", _STDLIB + "asyncio" + os.sep, _STDLIB + "multiprocessing" + os.sep,
             _STDLIB + "concurrent" + os.sep, _STDLIB + "contextlib.py", "<")


@dataclass
class Place:
    """Where a running job's code is besides its task: the thread that runs it, or a way to ask
    its child process for its stack. Set by the executor while the job is there."""

    thread: int | None = None
    child: Callable[[], Awaitable[list[StackFrame]]] | None = None


def awaited_frames(coro: Any) -> list[FrameType]:  # noqa: ANN401 - a coroutine, generator or awaited future
    """The frames of `coro` and of what it awaits, down to the innermost, outermost first. An
    awaited task is followed into its own coroutine."""
    frames: list[FrameType] = []
    seen: set[int] = set()
    while coro is not None and id(coro) not in seen and len(frames) < MAX_FRAMES * 2:
        seen.add(id(coro))
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None:
            frames.append(frame)
            coro = (getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
                    or getattr(coro, "ag_await", None))
            continue
        coro = _task_behind(coro)
    return frames


def _task_behind(awaited: object) -> object | None:
    """The coroutine of the task an `await` waits on: the task itself, or the iterator its
    `__await__` gave (which refers to the task and to nothing else of note)."""
    get_coro = getattr(awaited, "get_coro", None)
    if callable(get_coro):
        return get_coro()
    for referent in gc.get_referents(awaited):
        inner = getattr(referent, "get_coro", None)
        if callable(inner):
            return inner()
    return None


def thread_frames(ident: int) -> list[FrameType]:
    """The frames of the thread `ident` now, outermost first (none if it has ended)."""
    frame = sys._current_frames().get(ident)
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()
    return frames


def summarize(frames: Iterable[FrameType]) -> list[StackFrame]:
    """Each frame as a traceback prints it: file, line, function and that line's source."""
    out = []
    for frame in frames:
        code = frame.f_code
        line = frame.f_lineno or code.co_firstlineno
        source = linecache.getline(code.co_filename, line, frame.f_globals).strip()
        out.append(StackFrame(code.co_filename, line, code.co_name, source))
    return out


def trimmed(frames: list[StackFrame]) -> list[StackFrame]:
    """Without the worker's leading frames (those before the processor's code), and at most
    MAX_FRAMES of the innermost; all of them when every frame is the worker's own."""
    start = 0
    while start < len(frames) and frames[start].file.startswith(_PLUMBING):
        start += 1
    kept = frames[start:] if start < len(frames) else frames
    return kept[-MAX_FRAMES:]


def main_thread_stack() -> list[StackFrame]:
    """The main thread's stack, trimmed: what a child process answers for a plain processor."""
    return trimmed(summarize(thread_frames(threading.main_thread().ident or 0)))


def coroutine_stack(coro: object) -> list[StackFrame]:
    """The stack of a coroutine and what it awaits, trimmed: a child's answer for an async processor."""
    return trimmed(summarize(awaited_frames(coro)))


async def job_stack(task_coro: object, place: Place | None) -> list[StackFrame]:
    """A running job's stack: its task's coroutines, then the frames of the thread or child
    process its code runs in, if it runs in one now. A child that does not answer within
    CHILD_ANSWER_S (it is still starting: its listening thread is not up yet) leaves the
    worker's side alone, which ends where the worker waits for it."""
    frames = summarize(awaited_frames(task_coro))
    if place is not None and place.thread is not None:
        frames += summarize(thread_frames(place.thread))
    elif place is not None and place.child is not None:
        try:
            async with asyncio.timeout(CHILD_ANSWER_S):
                frames += await place.child()
        except TimeoutError:
            pass
    return trimmed(frames)


def blocked_stack(task_coro: object, loop_thread: int, place: Place | None) -> list[StackFrame]:
    """A job's stack, taken from another thread while the event loop is blocked. The task on the
    loop (the one that blocks it) runs: its coroutines are frames of the loop's thread, from its
    outermost coroutine's down to the blocking call. Any other task is suspended, and walked as
    on the loop (a child process cannot be asked: its answer would come through the loop)."""
    outer = getattr(task_coro, "cr_frame", None)
    loop_frames = thread_frames(loop_thread)
    at = next((i for i, frame in enumerate(loop_frames) if frame is outer), None)
    if at is not None:
        return trimmed(summarize(loop_frames[at:]))
    frames = summarize(awaited_frames(task_coro))
    if place is not None and place.thread is not None:
        frames += summarize(thread_frames(place.thread))
    return trimmed(frames)
