"""The pipeline: every job the caller passes as one graph, each job coloured by its last run
and showing its schedule and its queue, an edge from a job to each job whose steps consume
its batches, labelled with the batches that went along it in the last 24 hours and those
waiting on it now."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import Count, QuerySet
from django.utils import timezone

from batches.models import CLAIMABLE_STATES, ArchiveConsumpQueue, BatchConsumpQueue, BatchState
from lineage.graphs.model import Graph, GraphNode
from processes.models import ExecState, Process

if TYPE_CHECKING:
    from processes.selectors.dashboard import JobRow


def pipeline_graph(rows: Sequence[JobRow], title: str, now: datetime | None = None) -> Graph:
    """``rows``: the dashboard's rows of the jobs to draw (already scoped to the user); an
    edge joins two of them only, never a job left out."""
    now = now or timezone.now()
    graph = Graph("pipeline", title)
    ids = [row.job.pk for row in rows]
    for row in rows:
        state = ExecState(row.last_run.exec_state_id).name if row.last_run else "NOT RUN"
        detail = [row.schedule, f"{row.queue_depth} waiting"]
        if row.dead_letters:
            detail.append(f"{row.dead_letters} dead")
        if row.failures_24h:
            detail.append(f"{row.failures_24h} failed")
        graph.add(
            GraphNode(f"p{row.job.pk}", row.job.name, "job", " · ".join(detail), state, row.job.pk)
        )
    # A step of the downstream job consumes the upstream job's batches.
    links = (
        Process.enqueuing_processes.through.objects.filter(
            from_process__parent_id__in=ids, from_process__deleted=False, to_process_id__in=ids
        )
        .values_list("to_process_id", "from_process__parent_id")
        .distinct()
    )
    between = ("source_process_id", "process__parent_id")
    waiting = _counts(
        BatchConsumpQueue.objects.filter(
            process__parent_id__in=ids, batch_state_id__in=CLAIMABLE_STATES
        ),
        between,
    )
    moved = _counts(
        ArchiveConsumpQueue.objects.filter(
            process__parent_id__in=ids,
            batch_state_id=BatchState.PROCESSED,
            end_ts__gte=now - timedelta(hours=24),
        ),
        between,
    )
    for upstream, downstream in sorted(links):
        # A job of the link's downstream side (from_process__parent) is never NULL: filtered.
        edge = (upstream, downstream or 0)
        label = []
        if moved.get(edge):
            label.append(f"{moved[edge]} in 24 h")
        if waiting.get(edge):
            label.append(f"{waiting[edge]} waiting")
        graph.link(f"p{upstream}", f"p{downstream}", " · ".join(label) or "batches")
    return graph


def _counts(rows: QuerySet[Any], between: tuple[str, str]) -> dict[tuple[int, int], int]:
    """Batches per (upstream job, downstream job): a batch two steps of one job consume is
    one batch that went along the edge."""
    return {
        (r[between[0]], r[between[1]]): r["n"]
        for r in rows.values(*between).annotate(n=Count("source_batch_id", distinct=True))
    }
