"""Order a batch of new jobs so that every job comes after the jobs it depends on."""

from __future__ import annotations

from collections.abc import Sequence
from graphlib import CycleError, TopologicalSorter

from worker.errors import InvalidJob
from worker.models import JobCreate


def order_batch(jobs: Sequence[JobCreate]) -> tuple[list[JobCreate], set[str]]:
    """Return the jobs parents-first, and the ids they depend on outside the batch.

    Raises InvalidJob on a duplicate id, a self-dependency or a cycle within the batch.
    """
    by_id: dict[str, JobCreate] = {}
    for job in jobs:
        if job.id in by_id:
            raise InvalidJob(f"job id {job.id} appears twice in one enqueue")
        by_id[job.id] = job
    outside: set[str] = set()
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for job in jobs:
        if job.id in job.dependent_on_jobs:
            raise InvalidJob(f"job {job.id} depends on itself")
        inside = [dep for dep in job.dependent_on_jobs if dep in by_id]
        outside.update(dep for dep in job.dependent_on_jobs if dep not in by_id)
        sorter.add(job.id, *inside)
    try:
        order = list(sorter.static_order())
    except CycleError as exc:
        cycle = exc.args[1]
        raise InvalidJob("dependencies form a cycle: " + " -> ".join(cycle)) from None
    return [by_id[job_id] for job_id in order], outside
