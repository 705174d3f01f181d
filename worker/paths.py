"""Moved to `worker.core.paths`; this path stays for code written against it."""

from worker.core.paths import *  # noqa: F403
