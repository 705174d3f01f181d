"""Ordering a batch of new jobs parents first."""

from __future__ import annotations

import random
from graphlib import TopologicalSorter

import pytest

from jobdesk.core.dag import order_batch
from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import JobCreate


def test_dependencies_outside_the_batch_keep_its_order() -> None:
    """The order the full sort gives, and the outside ids, without sorting."""
    rng = random.Random(7)
    for _ in range(100):
        jobs = [JobCreate("t", {}, id=f"j{i}", dependent_on_jobs=[f"x{rng.randint(0, 5)}"
                                                                  for _ in range(rng.randint(0, 2))])
                for i in range(30)]
        ordered, outside = order_batch(jobs)
        sorter: TopologicalSorter[str] = TopologicalSorter()
        for job in jobs:
            sorter.add(job.id)
        assert [j.id for j in ordered] == list(sorter.static_order())
        assert outside == {d for j in jobs for d in j.dependent_on_jobs}


def test_parents_in_the_batch_come_first() -> None:
    child = JobCreate("t", {}, id="child", dependent_on_jobs=["parent", "outside"])
    ordered, outside = order_batch([child, JobCreate("t", {}, id="parent")])
    assert [j.id for j in ordered] == ["parent", "child"] and outside == {"outside"}


def test_a_job_that_depends_on_itself_is_refused() -> None:
    with pytest.raises(InvalidJob, match="depends on itself"):
        order_batch([JobCreate("t", {}, id="a", dependent_on_jobs=["a", "elsewhere"])])


def test_an_id_twice_in_a_batch_is_refused_naming_it() -> None:
    jobs = [JobCreate("t", {}, id=i) for i in ("a", "b", "c", "b", "a")]
    with pytest.raises(InvalidJob, match="job id b appears twice") as info:
        order_batch(jobs)
    assert info.value.job_id == "b" and info.value.field == "id"
