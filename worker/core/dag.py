"""Order a batch of new jobs so that every job comes after the jobs it depends on."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from graphlib import CycleError, TopologicalSorter

from jobdesk.core.errors import InvalidJob
from jobdesk.core.models import JobCreate


def order_batch(jobs: Sequence[JobCreate]) -> tuple[list[JobCreate], set[str]]:
    """Return the jobs parents-first, and the ids they depend on outside the batch.

    Raises InvalidJob on a duplicate id, a self-dependency or a cycle within the batch.
    """
    by_id = {job.id: job for job in jobs}
    if len(by_id) < len(jobs):  # some id twice: name the first job that repeats one
        seen: set[str] = set()
        for job in jobs:
            if job.id in seen:
                raise InvalidJob(f"job id {job.id} appears twice in one enqueue", job_id=job.id, field="id")
            seen.add(job.id)
    if not any(job.dependent_on_jobs for job in jobs):
        return list(jobs), set()  # independent jobs, the bulk case: already in order
    if not any(job.id in job.dependent_on_jobs or any(d in by_id for d in job.dependent_on_jobs) for job in jobs):
        # Every dependency outside the batch: the sort below would give the jobs in this order.
        return list(jobs), {d for job in jobs for d in job.dependent_on_jobs}
    outside: set[str] = set()
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for job in jobs:
        if job.id in job.dependent_on_jobs:
            raise InvalidJob(f"job {job.id} depends on itself", job_id=job.id, field="dependent_on_jobs")
        inside = [dep for dep in job.dependent_on_jobs if dep in by_id]
        outside.update(dep for dep in job.dependent_on_jobs if dep not in by_id)
        sorter.add(job.id, *inside)
    try:
        order = list(sorter.static_order())
    except CycleError as exc:
        cycle = exc.args[1]
        raise InvalidJob("dependencies form a cycle: " + " -> ".join(cycle), job_id=cycle[0],
                         field="dependent_on_jobs") from None
    return [by_id[job_id] for job_id in order], outside


def dependency_order(nodes: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """Ids parents first; among jobs that are ready together, the order given (enqueue order).
    Dependencies outside the list are ignored."""
    position = {job_id: i for i, (job_id, _) in enumerate(nodes)}
    children: dict[str, list[str]] = {job_id: [] for job_id in position}
    waiting: dict[str, int] = {}
    for job_id, deps in nodes:
        inside = {d for d in deps if d in position and d != job_id}
        waiting[job_id] = len(inside)
        for dep in inside:
            children[dep].append(job_id)
    ready = [position[j] for j, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    out: list[str] = []
    while ready:
        job_id = nodes[heapq.heappop(ready)][0]
        out.append(job_id)
        for child in children[job_id]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, position[child])
    # A cycle cannot be enqueued; should one exist anyway, its jobs come last, in enqueue order.
    seen = set(out)
    return out + [j for j, _ in nodes if j not in seen]
