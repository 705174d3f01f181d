"""Moved to `worker.core.errors`; this path stays for code written against it."""

from worker.core.errors import *  # noqa: F403
