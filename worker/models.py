"""Moved to `worker.core.models`; this path stays for code written against it."""

from worker.core.models import *  # noqa: F403
