"""Moved to `jobdesk.core.models`; this path stays for code written against it."""

from jobdesk.core.models import *  # noqa: F403
