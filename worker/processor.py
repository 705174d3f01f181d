"""Moved to `jobdesk.core.processor`; this path stays for code written against it."""

from jobdesk.core.processor import *  # noqa: F403
