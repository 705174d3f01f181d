"""Moved to `worker.core.schedules`; this path stays for code written against it."""

from worker.core.schedules import *  # noqa: F403
