"""`JobFilter.describe()` names every field of the filter: a bulk action's confirmation and its
audit row say the whole set it acts on. A field added to JobFilter fails here until it has words."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime

import pytest

from jobdesk.core.models import Status
from jobdesk.store.jobs import InputTerm, JobFilter

# One value per field of JobFilter, and what describe() must say for it.
SAMPLES: dict[str, tuple[object, str]] = {
    "statuses": (frozenset({Status.FAILED}), "status failed"),
    "type": ("pdf", "type pdf"),
    "type_pattern": ("video.*", "type video.*"),
    "pipeline_id": ("p-1", "pipeline p-1"),
    "user_id": (3, "user 3"),
    "created_from": (datetime(2026, 3, 1, 2, 0, tzinfo=UTC), "created since 2026-03-01 02:00 UTC"),
    "created_to": (datetime(2026, 3, 2, 2, 0, tzinfo=UTC), "created before 2026-03-02 02:00 UTC"),
    "search": ("smtp", "text “smtp”"),
    "error": ("timeout", "error containing “timeout”"),
    "fingerprint": ("ValueError: bad", "error “ValueError: bad”"),
    "input_terms": ((InputTerm(("user", "plan"), "business"),), 'input.user.plan = "business"'),
}


def test_every_field_has_a_sample_here() -> None:
    names = {f.name for f in fields(JobFilter)}
    assert set(SAMPLES) == names, (f"JobFilter's fields changed: give describe() words for "
                                   f"{sorted(names - set(SAMPLES))} and a sample here")


@pytest.mark.parametrize("name", [f.name for f in fields(JobFilter)])
def test_describe_names_each_field(name: str) -> None:
    value, words = SAMPLES[name]
    assert replace(JobFilter(), **{name: value}).describe() == words


def test_describe_names_every_field_together_in_order() -> None:
    everything = replace(JobFilter(), **{name: value for name, (value, _) in SAMPLES.items()})
    assert everything.describe() == ", ".join(words for _, words in SAMPLES.values())


def test_an_empty_filter_is_all_jobs() -> None:
    assert JobFilter().describe() == "all jobs"
    assert JobFilter(search="  ", error=" ").describe() == "all jobs"
