"""Moved to `jobdesk.runtime.launch`; this path stays for code written against it."""

from jobdesk.runtime.launch import *  # noqa: F403
