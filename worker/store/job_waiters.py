"""The waits on jobs in one process, woken by the job-change notifications that name their jobs.

The `jobs` table's triggers notify JOB_CHANGES_CHANNEL once per statement, with the ids it
changed, comma-separated, or `*` when it changed too many to list. `JobWaiters` fans each such
payload out in memory to the events of the waits on those jobs: the HTTP API's long-polls and
event streams, and the Python client's `wait`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Iterable, Iterator


class JobWaiters:
    """Events of waits, by the job ids each waits on."""

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}

    def __bool__(self) -> bool:
        return bool(self._events)

    def job_ids(self) -> list[str]:
        """The jobs waited on now."""
        return list(self._events)

    @contextlib.contextmanager
    def subscribe(self, job_ids: Collection[str]) -> Iterator[asyncio.Event]:
        """One event, set whenever a change may have touched one of `job_ids` (or `wake_all`);
        the caller clears it before each read."""
        event = asyncio.Event()
        for job_id in job_ids:
            self._events.setdefault(job_id, set()).add(event)
        try:
            yield event
        finally:
            for job_id in job_ids:
                events = self._events.get(job_id)
                if events is not None:
                    events.discard(event)
                    if not events:
                        del self._events[job_id]

    def on_changes(self, payload: str) -> None:
        """A JOB_CHANGES_CHANNEL notification: wake the waits on the jobs it names (all on `*`)."""
        if payload == "*":
            self.wake_all()
        else:
            self.wake(payload.split(","))

    def wake(self, job_ids: Iterable[str]) -> None:
        for job_id in job_ids:
            for event in self._events.get(job_id, ()):
                event.set()

    def wake_all(self) -> None:
        for events in self._events.values():
            for event in events:
                event.set()
