"""Settings from the environment and `.env`, validated once at start-up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import BeforeValidator, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from jobdesk.core.durations import parse_duration, parse_seconds
from jobdesk.core.errors import SettingsError
from jobdesk.core.limits import (
    Rate,
    parse_rates,
    parse_type_limits,
    parse_type_names,
    parse_type_sizes,
    parse_type_timeouts,
)
from jobdesk.core.sizes import parse_size


def _duration_seconds(value: object) -> object:
    """`90s`, `10m`, `12h`, `7d`, or plain seconds, as seconds."""
    return parse_seconds(value) if isinstance(value, str) else value


def _split_commas(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _duration(value: object) -> object:
    seconds = parse_duration(value) if isinstance(value, str) else value
    if isinstance(seconds, (int, float)) and seconds <= 0:
        raise ValueError("must be longer than 0 s (or 'forever')")
    return seconds


def _size(value: object) -> object:
    if isinstance(value, str):
        return parse_size(value) if value.strip() else None  # empty: no limit
    if isinstance(value, (int, float)) and value <= 0:
        raise ValueError("must be more than 0 bytes")
    return value


# Bytes, or None for no limit; read from `512MB`, `2GB` or a number of bytes (jobdesk.core.sizes).
Size = Annotated[int | None, BeforeValidator(_size)]

# Seconds, or None for "forever"; read from `90s`, `12h`, `7d` or `forever`.
Duration = Annotated[float | None, BeforeValidator(_duration)]

# The settings written per job type, with the parser of each: `TYPE=N,...`, `TYPE=N/P,...`, `TYPE,TYPE`.
PER_TYPE_PARSERS: dict[str, Callable[[str], object]] = {
    "JOB_TYPE_LIMITS": parse_type_limits, "JOB_USER_LIMITS": parse_type_limits,
    "JOB_RATE_LIMITS": parse_rates, "JOB_USER_RATE_LIMITS": parse_rates,
    "JOB_TYPE_TIMEOUTS": parse_type_timeouts, "JOB_FAIR_SHARE": parse_type_names,
    "JOB_TYPE_PROCESS_MAX_TASKS": parse_type_limits, "JOB_TYPE_PROCESS_MAX_MEMORY": parse_type_sizes,
}


class Settings(BaseSettings):
    """Every knob of the worker and the CLI. Variable names are part of the public contract."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore",
                                      case_sensitive=True)

    # PostgreSQL to use; unset means the embedded server in the user's data folder.
    DATABASE_URL: str | None = None
    # A direct connection (no pooler) to the same database, used only for LISTEN.
    DATABASE_LISTEN_URL: str | None = None
    # A streaming standby of DATABASE_URL that the console's reads and the HTTP API's GETs go to;
    # writes and LISTEN stay on DATABASE_URL. Unset: everything reads DATABASE_URL.
    DATABASE_READ_URL: str | None = None
    # Seconds between NOTIFY heartbeats to a process's own listener; one not back within as long marks it deaf.
    JOB_LISTEN_HEARTBEAT_INTERVAL: float = Field(10, gt=0)
    # Seconds between claim polls when no NOTIFY arrives.
    JOB_PROCESSOR_POLL_INTERVAL: float = Field(0.1, gt=0)
    # Jobs one worker runs at once.
    MAX_CONCURRENT_JOBS: int = Field(10, ge=1, le=10_000)
    # Most jobs of a type in progress at once across every worker: `video.render=2,image.generate=4`.
    JOB_TYPE_LIMITS: Annotated[dict[str, int], NoDecode] = {}
    # Most jobs of a type started per period across every worker: `image.generate=10/s,video.render=100/m`.
    JOB_RATE_LIMITS: Annotated[dict[str, Rate], NoDecode] = {}
    # Most jobs of a type started per period for one user_id: `image.generate=2/s`.
    JOB_USER_RATE_LIMITS: Annotated[dict[str, Rate], NoDecode] = {}
    # Most jobs of a type in progress at once for one user_id, across every worker: `video.render=1`.
    JOB_USER_LIMITS: Annotated[dict[str, int], NoDecode] = {}
    # Longest run of a job of a type in seconds, over its processor's `timeout`: `video.render=600,email.send=30`.
    JOB_TYPE_TIMEOUTS: Annotated[dict[str, float], NoDecode] = {}
    # Longest run, in seconds, of a job whose type neither JOB_TYPE_TIMEOUTS nor its processor limits; unset: none.
    JOB_TIMEOUT: float | None = Field(None, gt=0)
    # Jobs a process of executor "process" runs before a fresh one replaces it; unset: no limit.
    JOB_PROCESS_MAX_TASKS: int | None = Field(None, ge=1)
    # Jobs a process runs before a fresh one replaces it, by the type of the job it just ran, over
    # JOB_PROCESS_MAX_TASKS: `video.render=10`.
    JOB_TYPE_PROCESS_MAX_TASKS: Annotated[dict[str, int], NoDecode] = {}
    # Resident memory past which a process of executor "process" is replaced after its job, like
    # `512MB` or `2GB` (K, M, G, T are units of 1024 bytes; a plain number is bytes); unset: no limit.
    JOB_PROCESS_MAX_MEMORY: Size = None
    # The same by the type of the job a process just ran, over JOB_PROCESS_MAX_MEMORY:
    # `video.render=2GB,image.thumb=256MB`.
    JOB_TYPE_PROCESS_MAX_MEMORY: Annotated[dict[str, int], NoDecode] = {}
    # Types claimed round-robin across user_id (oldest first within each user): `video.render,image.generate` or `*`.
    JOB_FAIR_SHARE: Annotated[list[str], NoDecode] = []
    # Seconds to wait before each retry; N intervals mean N retries.
    JOB_RETRY_INTERVALS: Annotated[list[float], NoDecode] = [10, 30, 60, 120, 240, 240, 240, 240, 240, 240]
    # Connections in each process's pool.
    DB_POOL_SIZE: int = Field(20, ge=2, le=1000)
    # Modules with a PROCESSOR_MAP to load, comma-separated (added to --processors).
    JOB_PROCESSOR_MODULES: Annotated[list[str], NoDecode] = []
    # Folders added to the import path before loading processor modules, comma-separated.
    JOB_PROCESSOR_PATH: Annotated[list[str], NoDecode] = []
    # Seconds without a heartbeat after which a worker's jobs are taken back.
    JOB_LEASE_TIMEOUT: float = Field(30, gt=0)
    # Seconds between worker heartbeats.
    JOB_HEARTBEAT_INTERVAL: float = Field(5, gt=0)
    # Seconds a stopping worker waits for running jobs before putting them back.
    JOB_SHUTDOWN_TIMEOUT: float = Field(30, ge=0)
    # apprise URLs that receive admin alerts, comma-separated.
    JOB_ALERT_URLS: Annotated[list[str], NoDecode] = []
    # Seconds over which alerts past the first few of a minute are gathered into one digest.
    JOB_ALERT_DIGEST_SECONDS: float = Field(60, gt=0)
    # Seconds a console or CLI query may run before PostgreSQL cancels it.
    JOB_STATEMENT_TIMEOUT: float = Field(15, gt=0)
    # Port on which a worker serves Prometheus metrics; unset serves none.
    JOB_METRICS_PORT: int | None = Field(None, ge=0, le=65535)
    # How long finished jobs are kept, by status, and operator actions in audit_log; `forever` keeps them.
    JOB_RETENTION_COMPLETED: Duration = 7 * 86400
    # How long cancelled jobs are kept.
    JOB_RETENTION_CANCELLED: Duration = 7 * 86400
    # How long failed jobs are kept (a failed job also keeps the rest of its pipeline).
    JOB_RETENTION_FAILED: Duration = 30 * 86400
    # How long audit_log rows are kept.
    JOB_RETENTION_AUDIT: Duration = 90 * 86400
    # Seconds between pruner runs across the whole fleet.
    JOB_PRUNE_INTERVAL: float = Field(60, gt=0)
    # Log level of the worker: DEBUG, INFO, WARNING or ERROR.
    LOG_LEVEL: str = "INFO"
    # Lowest level of the log records a processor emits that are kept with its job: DEBUG, INFO, WARNING or ERROR.
    JOB_LOG_LEVEL: str = "INFO"
    # Most log lines kept per attempt of a job; past it, one line says how many were dropped.
    JOB_LOG_MAX_LINES: int = Field(1000, ge=1)
    # Most bytes of log messages kept per attempt of a job; past it, one line says how many were dropped.
    JOB_LOG_MAX_BYTES: int = Field(1_048_576, ge=1)
    # Whether the console starts a worker by itself on the embedded database when no live worker exists.
    JOBDESK_AUTOSTART_WORKER: bool = True
    # How long the embedded server runs on with no client before it stops by itself (90s, 10m, or seconds).
    JOBDESK_EMBEDDED_IDLE_STOP: float = Field(600, gt=0)
    # Address `jobdesk api` listens on (--host overrides it).
    JOBDESK_API_HOST: str = "127.0.0.1"
    # Port `jobdesk api` listens on (--port overrides it).
    JOBDESK_API_PORT: int = Field(8000, ge=0, le=65535)
    # Processes `jobdesk api` serves with, on one port (--workers overrides it).
    JOBDESK_API_WORKERS: int = Field(1, ge=1, le=64)
    # Largest request body the API accepts, in bytes; larger ones get 413.
    JOBDESK_API_MAX_BODY: int = Field(1_048_576, ge=1)
    # Browser origins allowed to call the API (CORS), comma-separated; none by default.
    JOBDESK_API_CORS_ORIGINS: Annotated[list[str], NoDecode] = []
    # Whether the console shows desktop notifications and the tray icon (false turns them all off).
    JOBDESK_NOTIFICATIONS: bool = True

    @field_validator("DATABASE_READ_URL")
    @classmethod
    def _read_url_needs_primary(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value:
            return None  # empty: no replica
        if not info.data.get("DATABASE_URL"):
            raise ValueError("needs DATABASE_URL, the primary the replica follows (the embedded database has none)")
        return value

    @field_validator("JOB_RETRY_INTERVALS", mode="before")
    @classmethod
    def _parse_intervals(cls, value: object) -> object:
        return _split_commas(value)

    @field_validator("JOB_RETRY_INTERVALS")
    @classmethod
    def _non_negative(cls, value: list[float]) -> list[float]:
        if any(v < 0 for v in value):
            raise ValueError("intervals must be zero or more seconds")
        return value

    @field_validator(*PER_TYPE_PARSERS, mode="before")
    @classmethod
    def _parse_per_type(cls, value: object, info: ValidationInfo) -> object:
        return PER_TYPE_PARSERS[str(info.field_name)](value) if isinstance(value, str) else value

    @field_validator("JOB_TIMEOUT", mode="before")
    @classmethod
    def _parse_timeout(cls, value: object) -> object:
        if isinstance(value, str):
            return _duration_seconds(value) if value.strip() else None  # empty: no limit
        return value

    @field_validator("JOB_PROCESS_MAX_TASKS", mode="before")
    @classmethod
    def _parse_max_tasks(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value  # empty: no limit

    @field_validator("JOBDESK_EMBEDDED_IDLE_STOP", mode="before")
    @classmethod
    def _parse_duration(cls, value: object) -> object:
        return _duration_seconds(value)

    @field_validator("JOB_PROCESSOR_MODULES", "JOB_PROCESSOR_PATH", "JOB_ALERT_URLS", "JOBDESK_API_CORS_ORIGINS",
                     mode="before")
    @classmethod
    def _parse_lists(cls, value: object) -> object:
        return _split_commas(value)

    @field_validator("LOG_LEVEL", "JOB_LOG_LEVEL")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
        return level


def load_settings(**overrides: object) -> Settings:
    """Read the settings; a malformed value raises SettingsError naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = exc.errors()[0]
        name = ".".join(str(part) for part in err["loc"][:1]) or "settings"
        raw = err.get("input")
        shown = f" (got {raw!r})" if isinstance(raw, (str, int, float)) else ""
        raise SettingsError(f"invalid setting {name}: {err['msg']}{shown}") from None
