"""The project with no jobdesk task backend: `jobdesk worker --django` has nothing to run."""

from mysite.settings import *  # noqa: F403

TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
