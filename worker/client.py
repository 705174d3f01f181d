"""Moved to `worker.service.client`; this path stays for code written against it."""

from worker.service.client import *  # noqa: F403
