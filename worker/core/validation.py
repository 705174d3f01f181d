"""The checks a new job passes before it is inserted: its fields' types and sizes, and text
that PostgreSQL can store (no NUL character, no unpaired surrogate), in JSON or not.

Pure: every door (the worker's next jobs, the CLI, the HTTP API, the Python client) meets the
same checks in `jobdesk.store.transitions.enqueue`, and can run them earlier itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import chain

from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import JobCreate
from jobdesk.core.pg_text import is_unicode, storable_text

_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # an escaped NUL, not an escaped backslash before "u0000"


def json_text(value: object, what: str = "the value", *, job_id: str | None = None, field: str | None = None) -> str:
    """JSON text for a jsonb parameter inside an array (asyncpg would read a list as a dimension).

    Refuses what JSON allows but PostgreSQL's jsonb cannot store: a NUL character, and unpaired
    UTF-16 surrogates (which are not Unicode text)."""
    if not value and (value == {} or value == []):  # most inputs and dependency lists of a bulk enqueue
        return "{}" if isinstance(value, dict) else "[]"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidJob(f"{what} is not JSON: {exc}", job_id=job_id, field=field) from None
    if "\\u0000" in text and _NUL.search(text):
        raise InvalidJob(f"{what} contains a NUL character (\\u0000), which PostgreSQL cannot store",
                         job_id=job_id, field=field)
    if not is_unicode(text):
        raise InvalidJob(f"{what} contains an unpaired surrogate (like \\ud800), which is not Unicode text",
                         job_id=job_id, field=field)
    return text


def _check_text_fields(job: JobCreate) -> None:
    named = [("type", job.type), ("id", job.id), ("pipeline_id", job.pipeline_id), ("unique_key", job.unique_key)]
    named += [("dependent_on_jobs", d) for d in (job.dependent_on_jobs if isinstance(job.dependent_on_jobs, list)
                                                   else []) if isinstance(d, str)]
    for field, value in named:
        if isinstance(value, str) and not storable_text(value):
            raise InvalidJob(f"{field} contains a NUL character or an unpaired surrogate, which PostgreSQL "
                             f"cannot store", job_id=job.id if field != "id" else None, field=field)


# The lengths the table holds, which the per-job and the bulk checks both apply.
MAX_ID = 36  # jobs.id and jobs.pipeline_id, varchar(36)
MAX_NAME = 255  # jobs.type and jobs.unique_key, varchar(255)


def check_new_job(job: JobCreate) -> None:
    _check_text_fields(job)
    if not isinstance(job.type, str) or not job.type.strip():
        raise InvalidJob("a job needs a non-empty type", job_id=job.id, field="type")
    if len(job.type) > MAX_NAME:
        raise InvalidJob(f"job type is longer than {MAX_NAME} characters: {job.type[:40]}…", job_id=job.id,
                         field="type")
    if not isinstance(job.id, str) or not job.id or len(job.id) > MAX_ID:
        raise InvalidJob(f"job id must be a string of 1 to {MAX_ID} characters, got {job.id!r}", field="id")
    if not isinstance(job.input_data, dict):
        raise InvalidJob(f"input_data of job {job.id} must be a JSON object", job_id=job.id,
                         field="input_data")
    if not isinstance(job.dependent_on_jobs, list) or not all(
            isinstance(dep, str) for dep in job.dependent_on_jobs):
        raise InvalidJob(f"dependent_on_jobs of job {job.id} must be a list of job ids", job_id=job.id,
                         field="dependent_on_jobs")
    _check_integers(job)
    if job.pipeline_id is not None and (not isinstance(job.pipeline_id, str) or len(job.pipeline_id) > MAX_ID):
        raise InvalidJob(f"pipeline id must be a string of at most {MAX_ID} characters, got {job.pipeline_id!r}",
                         job_id=job.id, field="pipeline_id")
    if job.scheduled_at is not None:
        if not isinstance(job.scheduled_at, datetime):
            raise InvalidJob(f"scheduled_at of job {job.id} must be a datetime", job_id=job.id, field="scheduled_at")
        try:  # a naive time is the local time of this machine
            job.scheduled_at = job.scheduled_at.astimezone(UTC)
        except (OverflowError, ValueError):
            raise InvalidJob(f"scheduled_at of job {job.id} is out of range", job_id=job.id,
                             field="scheduled_at") from None
    if job.unique_key is not None and (not isinstance(job.unique_key, str) or not 1 <= len(job.unique_key) <= MAX_NAME):
        raise InvalidJob(f"unique_key of job {job.id} must be a string of 1 to {MAX_NAME} characters", job_id=job.id,
                         field="unique_key")
    if job.debounce is not None or job.debounce_max is not None:
        _check_debounce(job)


def check_new_jobs(jobs: Sequence[JobCreate]) -> None:
    """`check_new_job` for every job of a batch, refusing the first bad job as it does.

    A bulk batch (no start time or debounce; plain ints, dicts, lists and strings) is
    cleared a field at a time over the whole batch, in a few passes at C speed: a quarter of the
    time of checking 20,000 jobs one by one. A batch it does not clear is checked job by job, so
    a refusal is the same whichever way the batch went."""
    if not _clears_in_bulk(jobs):
        for job in jobs:
            check_new_job(job)


def _clears_in_bulk(jobs: Sequence[JobCreate]) -> bool:
    """True only if every job would pass `check_new_job` unchanged (it converts a start time)."""
    if any(j.scheduled_at is not None or j.debounce is not None or j.debounce_max is not None for j in jobs):
        return False
    ids, inputs, deps = [j.id for j in jobs], [j.input_data for j in jobs], [j.dependent_on_jobs for j in jobs]
    type_names, pipeline_ids = [j.type for j in jobs], [j.pipeline_id for j in jobs]
    priorities, user_ids, key_list = [j.priority for j in jobs], [j.user_id for j in jobs], [j.unique_key for j in jobs]
    # Exact types first (True is an int, a str subclass may compare and hash as it likes):
    # anything else goes job by job.
    none = type(None)
    if (set(map(type, ids)) != {str} or set(map(type, inputs)) != {dict} or set(map(type, deps)) != {list}
            or set(map(type, type_names)) != {str} or not set(map(type, pipeline_ids)) <= {str, none}
            or set(map(type, priorities)) != {int} or not set(map(type, user_ids)) <= {int, none}
            or not set(map(type, key_list)) <= {str, none}):
        return False
    dep_ids = list(chain.from_iterable(deps))
    types = set(type_names)
    pipelines = {p for p in set(pipeline_ids) if p is not None}
    keys = [k for k in key_list if k is not None]
    numbers = set(priorities) | {u for u in set(user_ids) if u is not None}
    return (set(map(type, dep_ids)) <= {str}
            and min(map(len, ids)) >= 1 and max(map(len, ids)) <= MAX_ID
            and all(t.strip() and len(t) <= MAX_NAME for t in types) and all(len(p) <= MAX_ID for p in pipelines)
            and (not keys or (min(map(len, keys)) >= 1 and max(map(len, keys)) <= MAX_NAME))
            and min(numbers) in INT4 and max(numbers) in INT4
            and storable_text("".join(chain(ids, dep_ids, types, pipelines, keys))))


INT4 = range(-(2**31), 2**31)  # PostgreSQL's integer, the type of jobs.priority and jobs.user_id


def _check_integers(job: JobCreate) -> None:
    """`priority` and `user_id` are integers the table can hold (True is not a priority)."""
    for name in ("priority", "user_id"):
        value = getattr(job, name)
        if value is None and name == "user_id":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value not in INT4:
            raise InvalidJob(f"{name} of job {job.id} must be an integer from -2147483648 to 2147483647, "
                             f"got {value!r}", job_id=job.id, field=name)


MAX_DEBOUNCE_S = 366 * 86400  # a debounce (or its cap) of at most a year


def _check_debounce(job: JobCreate) -> None:
    """`debounce` needs a unique_key and a duration above 0; `debounce_max` needs a debounce and
    is no shorter than it."""
    for name in ("debounce", "debounce_max"):
        value = getattr(job, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 < value <= MAX_DEBOUNCE_S):
            raise InvalidJob(f"{name} of job {job.id} must be a number of seconds above 0 and at most a year",
                             job_id=job.id, field=name)
    if job.debounce is None:
        raise InvalidJob(f"debounce_max of job {job.id} needs a debounce", job_id=job.id, field="debounce_max")
    if job.unique_key is None:
        raise InvalidJob(f"debounce of job {job.id} needs a unique_key: the key of the jobs it gathers",
                         job_id=job.id, field="debounce")
    if job.debounce_max is not None and job.debounce_max < job.debounce:
        raise InvalidJob(f"debounce_max of job {job.id} is shorter than its debounce", job_id=job.id,
                         field="debounce_max")
