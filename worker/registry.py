"""Moved to `worker.runtime.registry`; this path stays for code written against it."""

from worker.runtime.registry import *  # noqa: F403
