"""The worker's LISTEN for new jobs and control messages, kept going beside its pool.

The keeping is `ListenerSupervisor`'s, as for the console and the HTTP API: it opens the listen
connection again when it drops, drops it when it goes deaf (its heartbeat does not come back) and
listens again a while later, and keeps trying, with backoff, while it cannot connect. The worker
polls all the while, so a listener that is gone only slows new work down; each time it listens
again the pumps are woken, as work may have been announced unheard. The log gets one line per
change of state, not one per attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from jobdesk.store.listen_supervisor import ListenerSupervisor, ListenTiming, ListenWording
from jobdesk.store.listener import Handler, Sender, listen_dsn

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings

log = logging.getLogger("jobdesk.worker")


def worker_listener(dsn: str, settings: Settings, handlers: Mapping[str, Handler], *, send: Sender,
                    on_listening: Callable[[], None]) -> ListenerSupervisor:
    """The supervisor of a worker's LISTEN on `handlers`' channels, at the listen URL of `dsn`
    (DATABASE_LISTEN_URL when given; none behind a transaction pooler without it). `send`
    carries the heartbeat: a NOTIFY through the worker's pool, the path new jobs are announced by."""
    poll = settings.JOB_PROCESSOR_POLL_INTERVAL
    return ListenerSupervisor(listen_dsn(dsn, settings), handlers, on_listening=on_listening, send=send,
                              timing=ListenTiming(heartbeat_interval=settings.JOB_LISTEN_HEARTBEAT_INTERVAL),
                              wording=ListenWording(subject="new jobs", logger=log, name="jobdesk-listener",
                                                    meanwhile=f"polling for new jobs every {poll:g} s"))
