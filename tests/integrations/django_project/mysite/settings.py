"""A small Django project whose tasks run on jobdesk: its database is DATABASE_URL's."""

import os
from urllib.parse import parse_qs, urlsplit

_url = urlsplit(os.environ["DATABASE_URL"])
_query = {k: v[-1] for k, v in parse_qs(_url.query).items()}

SECRET_KEY = "test-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
INSTALLED_APPS = ["shop"]
ROOT_URLCONF = "mysite.urls"
MIDDLEWARE: list[str] = []
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": _url.username or "postgres",
        "PASSWORD": _url.password or "",
        "HOST": _query.get("host") or _url.hostname or "",
        "PORT": str(_url.port or _query.get("port") or ""),
    }
}
TASKS = {"default": {"BACKEND": "jobdesk.integrations.django.JobdeskBackend"}}
