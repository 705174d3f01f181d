"""The rules of statuses, one table each: which operator action a job's status allows, which
command a worker's state allows, the retry rule, and who asks (for the audit log).

Pure: `jobdesk.store.transitions` applies these rules under its row locks, and the console reads
the same tables to offer only the actions that can succeed.
"""

from __future__ import annotations

import getpass
import logging
import traceback as tb_module
from collections.abc import Sequence
from dataclasses import dataclass

from jobdesk.core.errors import JobTimedOut
from jobdesk.core.models import Status

log = logging.getLogger(__name__)

# Which statuses each operator action may start from.
LEGAL_FROM: dict[str, frozenset[Status]] = {
    "cancel": frozenset({Status.QUEUED, Status.WAITING_APPROVAL, Status.IN_PROGRESS}),
    "retry": frozenset({Status.FAILED, Status.CANCELLED}),
    "approve": frozenset({Status.WAITING_APPROVAL}),
    "reject": frozenset({Status.WAITING_APPROVAL}),
}


# Which worker states each operator command to a worker may be sent in. A lost worker takes
# none: it is not there to act on it.
WORKER_COMMANDS_LEGAL_FROM: dict[str, frozenset[str]] = {
    "pause": frozenset({"running"}),
    "resume": frozenset({"paused"}),
    "drain": frozenset({"running", "paused"}),
    "stop": frozenset({"running", "paused", "draining"}),
}


def worker_command_is_legal(command: str, state: str) -> bool:
    return state in WORKER_COMMANDS_LEGAL_FROM.get(command, frozenset())


def is_legal(action: str, status: Status | str) -> bool:
    return Status(status) in LEGAL_FROM[action]



# The operator actions that may be applied to every job a filter matches.
BULK_ACTIONS = ("retry", "cancel", "approve", "reject")


@dataclass(frozen=True)
class Actor:
    """Who asks for an operator action, for the audit log."""

    source: str  # cli, api, console
    os_user: str | None = None
    name: str | None = None  # who, beyond the OS user: an API token's name

    @classmethod
    def current(cls, source: str) -> Actor:
        try:
            user = getpass.getuser()
        except Exception as exc:  # noqa: BLE001 - no user name here (the error depends on the platform); logged
            log.debug("no OS user name for the audit log, recorded without one: %s", exc)
            user = None
        return cls(source, user)


def retry_decision(retry_count: int, intervals: Sequence[float], permanent: bool) -> tuple[Status, int, float | None]:
    """The retry rule: N intervals mean N retries.

    After the k-th failure (k <= N) the job is queued again with retry_count = k and waits the
    k-th interval; the (N+1)-th failure, or a permanent error, makes it failed.
    """
    if permanent or retry_count >= len(intervals):
        return Status.FAILED, retry_count, None
    return Status.QUEUED, retry_count + 1, float(intervals[retry_count])


@dataclass(frozen=True)
class BulkChunk:
    """What one chunk of a bulk action did."""

    picked: list[str]  # the matching jobs it acted on
    changed: list[str]  # every job it changed (for cancel, dependants too)
    next_seq: int | None  # where the next chunk starts (after this seq), None when done


def format_exception(exc: BaseException) -> tuple[str, str]:
    """The one-line error and the full traceback of a processor's exception."""
    if isinstance(exc, JobTimedOut):  # the engine's own words, `timed out after 30 s`, as they are
        return str(exc), ""
    first = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return first, "".join(tb_module.format_exception(exc))
