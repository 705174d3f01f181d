"""Moved to `jobdesk.core.input_validation`; this path stays for code written against it."""

from jobdesk.core.input_validation import *  # noqa: F403
