"""The shape of a job: its live steps and the order the ``next_processes`` links give them."""

from __future__ import annotations

from collections import defaultdict

from processes.models import Process

NextLinks = Process.next_processes.through


def steps_in_order(job: Process) -> list[Process]:
    """The job's live steps in a topological order of the workflow (ties by id); steps not
    reachable from the job's first steps come last. Three queries whatever the size."""
    steps = {s.pk: s for s in job.steps.filter(deleted=False).order_by("id")}
    first = [
        pk
        for pk in NextLinks.objects.filter(from_process_id=job.pk)
        .order_by("to_process_id")
        .values_list("to_process_id", flat=True)
        if pk in steps
    ]
    successors: dict[int, list[int]] = defaultdict(list)
    indegree = dict.fromkeys(steps, 0)
    for src, dst in NextLinks.objects.filter(from_process_id__in=list(steps)).values_list(
        "from_process_id", "to_process_id"
    ):
        if src in steps and dst in steps:
            successors[src].append(dst)
            indegree[dst] += 1
    ordered: list[int] = []
    ready = sorted(pk for pk in first if indegree[pk] == 0)
    seen: set[int] = set()
    while ready:
        pk = ready.pop(0)
        if pk in seen:
            continue
        seen.add(pk)
        ordered.append(pk)
        for nxt in sorted(successors[pk]):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
        ready.sort()
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
