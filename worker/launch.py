"""Moved to `worker.runtime.launch`; this path stays for code written against it."""

from worker.runtime.launch import *  # noqa: F403
