"""Batch and file provenance, read from the queue and its archive: a row says that a step
consumed ``source_batch`` into its job's ``target_batch``. Walking those rows upstream from
a batch finds the batches and the landing files it was made from; walking downstream finds
what was made from it. One query per hop level and direction, whatever the depth."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Q

from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, File

UP, DOWN, BOTH = "up", "down", "both"


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
            b.source_instance_exec.process.name if b.source_instance_exec_id else None,
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
