"""What the batches' pages and API read for a user: queue rows and batches of the teams he
may see (``scope``, the one rule of who sees what), and which queue rows he may act on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from batches import queue
from batches.models import (
    CLAIMABLE_STATES,
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    File,
    HiveTable,
    Partition,
)
from bdre.access import AnyUser, Role, can, scope, teams
from processes.models import Process


def queue_rows(
    user: AnyUser, *, archived: bool = False
) -> QuerySet[BatchConsumpQueue] | QuerySet[ArchiveConsumpQueue]:
    """The queue's (or its archive's) rows the user may see, newest first, with their step,
    job, state and source step."""
    model = ArchiveConsumpQueue if archived else BatchConsumpQueue
    rows: QuerySet[Any] = scope(user, model.objects.all())
    return rows.select_related("process__parent", "batch_state", "source_process").order_by("-id")


def with_actions(user: AnyUser, rows: list[BatchConsumpQueue]) -> None:
    """Mark each row of a page with ``can_act`` (the user holds the developer role in its
    team) and its ``history`` (its failed attempts): two queries for the page."""
    allowed = set(
        scope(
            user, BatchConsumpQueue.objects.filter(pk__in=[r.pk for r in rows]), Role.DEVELOPER
        ).values_list("pk", flat=True)
    )
    history = queue.attempt_history(rows)
    for row in rows:
        row.can_act = row.pk in allowed  # type: ignore[attr-defined]
        row.history = history[row.pk]  # type: ignore[attr-defined]


def steps(user: AnyUser) -> QuerySet[Process]:
    """The live steps the user may see, by job and name (the queue's step filter)."""
    return (
        scope(user, Process.objects.live().filter(parent__isnull=False))
        .select_related("parent")
        .order_by("parent__name", "name")
    )


def acting_on(user: AnyUser, ids: Iterable[int]) -> list[int]:
    """Of the queue rows ``ids``, those the user may requeue or discard (the developer role
    in their team), in the order given, once each. PermissionDenied when he sees one without
    that role; rows he does not see are left out, as if they did not exist."""
    wanted = list(dict.fromkeys(ids))
    rows = BatchConsumpQueue.objects.filter(pk__in=wanted)
    visible = set(scope(user, rows).values_list("pk", flat=True))
    allowed = set(scope(user, rows, Role.DEVELOPER).values_list("pk", flat=True))
    if visible - allowed:
        raise PermissionDenied(
            "Requeue and discard need the developer role in the owning team of every row."
        )
    return [pk for pk in wanted if pk in allowed]


def batches(user: AnyUser) -> QuerySet[Batch]:
    """The batches the user may see, newest first, each with its run and job, its files
    (count and bytes) and the steps of the user's teams still waiting to claim it (another
    team's step may consume the batch: its rows are not the user's to count); subqueries,
    since two joined counts would multiply each other."""
    files = File.objects.filter(batch=OuterRef("pk")).values("batch")
    waiting = (
        scope(
            user,
            BatchConsumpQueue.objects.filter(
                source_batch=OuterRef("pk"), batch_state_id__in=CLAIMABLE_STATES
            ),
        )
        .values("source_batch")
        .annotate(n=Count("id"))
        .values("n")
    )
    return (
        scope(user, Batch.objects.all())
        .select_related("source_instance_exec__process")
        .annotate(
            file_count=Coalesce(Subquery(files.annotate(n=Count("id")).values("n")), 0),
            file_bytes=Subquery(files.annotate(n=Sum("file_size")).values("n")),
            first_file=Subquery(
                File.objects.filter(batch=OuterRef("pk")).order_by("path").values("path")[:1]
            ),
            waiting=Coalesce(Subquery(waiting), 0),
        )
        .order_by("-id")
    )


def batch_files(batch: Batch) -> QuerySet[File]:
    return File.objects.filter(batch=batch).order_by("id")


def tables(user: AnyUser) -> QuerySet[HiveTable]:
    """The registered tables the user may see: his teams' own, and other teams' tables
    shared with one of them (read-only), as steps resolve names (``batches.tables``)."""
    own = scope(user, HiveTable.objects.all()).values("pk")
    shared = HiveTable.objects.filter(shares__team__in=teams(user)).values("pk")
    return HiveTable.objects.filter(Q(pk__in=own) | Q(pk__in=shared))


def table_partitions(table: HiveTable, *, every_attempt: bool = False) -> QuerySet[Partition]:
    """The table's published partitions, newest batch first (every attempt, written,
    replaced and discarded ones too, with ``every_attempt``), each with its step's run."""
    rows = Partition.objects.filter(table=table).select_related("step_run")
    if not every_attempt:
        rows = rows.filter(state=Partition.State.PUBLISHED)
    return rows.order_by("-batch_id", "-id")


def visible_partitions(user: AnyUser, table: HiveTable) -> QuerySet[Partition]:
    """The partitions of ``table`` (one of :func:`tables`) the user may look into: every
    attempt of his team's own table, the published ones of a table shared with his team."""
    return table_partitions(table, every_attempt=can(user, table, Role.VIEWER))


def chosen_partition(user: AnyUser, table: HiveTable, partition_id: int | None) -> Partition | None:
    """The partition ``partition_id`` of ``table`` if the user may look into it, or with no
    id the newest published one (what the table's preview shows unless told otherwise)."""
    if partition_id is None:
        return table_partitions(table).first()
    return visible_partitions(user, table).filter(pk=partition_id).first()


def batch_partitions(user: AnyUser, batch: Batch) -> QuerySet[Partition]:
    """The published partitions of ``batch``, of the tables the user may see."""
    return (
        Partition.objects.filter(
            batch=batch, state=Partition.State.PUBLISHED, table__in=tables(user)
        )
        .select_related("table", "step_run")
        .order_by("table__dbname", "table__table_name")
    )
