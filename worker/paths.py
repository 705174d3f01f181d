"""Moved to `jobdesk.core.paths`; this path stays for code written against it."""

from jobdesk.core.paths import *  # noqa: F403
