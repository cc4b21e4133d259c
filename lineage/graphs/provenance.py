"""Batch and file provenance, read from the queue and its archive, and its graph: a row says
that a step consumed ``source_batch`` into its job's ``target_batch``. Walking those rows
upstream from a batch finds the batches and the landing files it was made from; walking
downstream finds what was made from it. One query per hop level and direction, whatever the
depth. ``provenance_graph`` draws the batches the caller may see (``bdre.access.scope``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.db.models import Q, QuerySet

from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, File
from lineage.graphs.model import Graph, GraphNode
from processes.models import ExecState

UP, DOWN, BOTH = "up", "down", "both"
FILES_PER_BATCH = 12  # the files drawn into a batch; the rest are counted


@dataclass(frozen=True, order=True)
class Hop:
    """A step consumed ``source`` into ``target`` (the batch its job's run produced)."""

    source: int
    target: int
    step_id: int
    step: str
    state: str


@dataclass
class BatchInfo:
    id: int
    job: str | None  # the job whose run produced it (None: a file registration)
    run_id: int | None
    files: list[tuple[int, str]] = field(default_factory=list)  # (file id, path)


@dataclass
class Provenance:
    batch_id: int
    hops: list[Hop]
    batches: dict[int, BatchInfo]

    def upstream_files(self) -> list[tuple[int, str]]:
        """The files of every batch upstream of (and including) the batch."""
        behind = self._reach(self.batch_id, upstream=True)
        return sorted(f for b in behind for f in self.batches[b].files)

    def downstream_batches(self, of: int | None = None) -> list[int]:
        start = self.batch_id if of is None else of
        return sorted(self._reach(start, upstream=False) - {start})

    def _reach(self, start: int, *, upstream: bool) -> set[int]:
        seen, frontier = {start}, [start]
        while frontier:
            nxt = [
                (h.source if upstream else h.target)
                for h in self.hops
                if (h.target if upstream else h.source) in frontier
            ]
            frontier = [b for b in nxt if b not in seen]
            seen.update(frontier)
        return seen


def _hops(condition: Q) -> set[Hop]:
    found: set[Hop] = set()
    for model in (BatchConsumpQueue, ArchiveConsumpQueue):
        rows = model.objects.filter(condition, target_batch__isnull=False).values_list(
            "source_batch_id", "target_batch_id", "process_id", "process__name", "batch_state__name"
        )
        found.update(Hop(*row) for row in rows)
    return found


def _walk(start: int, upstream: bool, max_levels: int) -> set[Hop]:
    hops: set[Hop] = set()
    seen, frontier = {start}, {start}
    for _ in range(max_levels):
        if not frontier:
            break
        key = "target_batch_id__in" if upstream else "source_batch_id__in"
        level = _hops(Q(**{key: list(frontier)}))
        hops |= level
        reached = {h.source if upstream else h.target for h in level}
        frontier = reached - seen
        seen |= reached
    return hops


def _infos(batch_ids: Iterable[int]) -> dict[int, BatchInfo]:
    ids = set(batch_ids)
    infos = {
        b.pk: BatchInfo(
            b.pk,
            b.source_instance_exec.process.name if b.source_instance_exec is not None else None,
            b.source_instance_exec_id,
        )
        for b in Batch.objects.filter(pk__in=ids).select_related("source_instance_exec__process")
    }
    for file_id, batch_id, path in (
        File.objects.filter(batch_id__in=ids).order_by("id").values_list("id", "batch_id", "path")
    ):
        infos[batch_id].files.append((file_id, path))
    return infos


def trace(batch_id: int, direction: str = BOTH, max_levels: int = 100) -> Provenance:
    """The batches, runs and files upstream and/or downstream of ``batch_id``."""
    hops: set[Hop] = set()
    if direction in (UP, BOTH):
        hops |= _walk(batch_id, True, max_levels)
    if direction in (DOWN, BOTH):
        hops |= _walk(batch_id, False, max_levels)
    ids = {batch_id} | {h.source for h in hops} | {h.target for h in hops}
    return Provenance(batch_id, sorted(hops), _infos(ids))


def from_file(file_id: int) -> Provenance:
    """What was made from a file: everything downstream of the batch it was registered in."""
    batch_id = File.objects.values_list("batch_id", flat=True).get(pk=file_id)
    return trace(batch_id, DOWN)


def provenance_graph(
    batch_id: int, direction: str = BOTH, visible: QuerySet[Batch] | None = None
) -> Graph:
    """The batches and files upstream and downstream of a batch: files into the batch they
    were registered in, then a batch into the batch of each job run that consumed it. Only
    batches in ``visible`` (the user's teams') are drawn."""
    found = trace(batch_id, direction)
    graph = Graph("batch", f"Provenance of batch {batch_id}")
    shown = visible if visible is not None else Batch.objects.all()
    # a batch is coloured by the state of the run that produced it
    states = dict(
        shown.filter(pk__in=list(found.batches)).values_list(
            "pk", "source_instance_exec__exec_state_id"
        )
    )
    for bid in sorted(states):
        info, state = found.batches[bid], states[bid]
        graph.add(
            GraphNode(
                f"b{bid}",
                f"batch {bid}",
                "batch",
                info.job or f"{len(info.files)} file(s) registered",
                ExecState(state).name if state else "",
                ref=bid,
                focus=bid == batch_id,
            )
        )
    for bid in sorted(states):
        files = found.batches[bid].files
        for file_id, path in files[:FILES_PER_BATCH]:
            name = PurePosixPath(path).name or path
            graph.add(GraphNode(f"f{file_id}", name, "file", path, ref=file_id))
            graph.link(f"f{file_id}", f"b{bid}")
        if len(files) > FILES_PER_BATCH:
            more = f"more{bid}"
            graph.add(GraphNode(more, f"{len(files) - FILES_PER_BATCH} more files", "more"))
            graph.link(more, f"b{bid}")
    for hop in found.hops:
        graph.link(f"b{hop.source}", f"b{hop.target}", hop.step)
    return graph
