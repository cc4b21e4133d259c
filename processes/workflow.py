"""The shape of a job: its live steps and the order the ``next_processes`` links give them.

:func:`topological_order` is the one topological sort of BDRE (``graphlib``): the order of a
job's steps, of a template's steps, and the registry's cycle check all come from it."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping
from graphlib import CycleError, TopologicalSorter
from heapq import heapify, heappop, heappush
from typing import Any, TypeVar

from processes.models import Process

NextLinks = Process.next_processes.through

N = TypeVar("N", bound=Hashable)


def topological_order(
    successors: Mapping[N, Iterable[N]], *, start: Collection[N] | None = None
) -> tuple[list[N], list[N] | None]:
    """The nodes in an order where each comes after those that link to it, the smallest
    ready node first, and the first cycle found, if any (``a, b, a``: a links to b, b to a;
    looked for in the order of ``successors``, each node's links in their order).

    Nodes on a cycle or after one are left out of the order; with ``start``, so are the
    nodes without predecessors that are not in ``start``, and the nodes after them."""
    sorter: TopologicalSorter[Any] = TopologicalSorter()
    for node in successors:
        sorter.add(node)
    for node, after in successors.items():
        for nxt in after:
            sorter.add(nxt, node)
    cycle = None
    try:
        sorter.prepare()
    except CycleError as exc:  # the nodes before the cycle are still given in order
        cycle = list(exc.args[1])
    ready = [n for n in sorter.get_ready() if start is None or n in start]
    heapify(ready)
    ordered: list[N] = []
    while ready:
        node = heappop(ready)
        ordered.append(node)
        sorter.done(node)
        for nxt in sorter.get_ready():
            heappush(ready, nxt)
    return ordered, cycle


def steps_in_order(job: Process) -> list[Process]:
    """The job's live steps in a topological order of the workflow (ties by id); steps not
    reachable from the job's first steps come last, each with its type (the kind its callers
    run or draw). Three queries whatever the size."""
    live = job.steps.filter(deleted=False).select_related("process_type").order_by("id")
    steps = {s.pk: s for s in live}
    first = set(
        NextLinks.objects.filter(from_process_id=job.pk).values_list("to_process_id", flat=True)
    )
    successors: dict[int, list[int]] = {pk: [] for pk in steps}
    for src, dst in NextLinks.objects.filter(from_process_id__in=list(steps)).values_list(
        "from_process_id", "to_process_id"
    ):
        if src in steps and dst in steps:
            successors[src].append(dst)
    ordered, _ = topological_order(successors, start=first)
    seen = set(ordered)
    ordered += [pk for pk in steps if pk not in seen]
    return [steps[pk] for pk in ordered]


def predecessors(steps: list[Process]) -> dict[int, set[int]]:
    """For each step, the steps that link to it (one query)."""
    ids = [s.pk for s in steps]
    result: dict[int, set[int]] = {pk: set() for pk in ids}
    for src, dst in NextLinks.objects.filter(
        from_process_id__in=ids, to_process_id__in=ids
    ).values_list("from_process_id", "to_process_id"):
        result[dst].add(src)
    return result
