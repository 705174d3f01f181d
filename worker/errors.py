"""Moved to `jobdesk.core.errors`; this path stays for code written against it."""

from jobdesk.core.errors import *  # noqa: F403
