"""Moved to `worker.core.processor`; this path stays for code written against it."""

from worker.core.processor import *  # noqa: F403
