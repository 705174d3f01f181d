"""Moved to `jobdesk.core.schedules`; this path stays for code written against it."""

from jobdesk.core.schedules import *  # noqa: F403
