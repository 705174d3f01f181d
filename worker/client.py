"""Moved to `jobdesk.service.client`; this path stays for code written against it."""

from jobdesk.service.client import *  # noqa: F403
