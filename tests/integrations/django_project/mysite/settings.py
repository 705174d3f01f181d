"""A small Django project whose tasks run on jobdesk. Its database is MYSITE_DATABASE_URL's, or
else DATABASE_URL's; with MYSITE_DATABASE=embedded, jobdesk's embedded PostgreSQL."""

import os
from urllib.parse import parse_qs, urlsplit

_url = urlsplit(os.environ.get("MYSITE_DATABASE_URL") or os.environ.get("DATABASE_URL", ""))
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

if os.environ.get("MYSITE_DATABASE") == "embedded":  # as docs/django.md shows
    from jobdesk.integrations.django import embedded_database

    DATABASES = {"default": embedded_database()}
