"""Moved to `worker.core.input_validation`; this path stays for code written against it."""

from worker.core.input_validation import *  # noqa: F403
