"""Moved to `jobdesk.runtime.registry`; this path stays for code written against it."""

from jobdesk.runtime.registry import *  # noqa: F403
