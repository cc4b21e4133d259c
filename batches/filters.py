"""The filters of the queue, the archive, batches and files."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django_filters import rest_framework as filters

from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, File, Partition
from bdre.filters import FilterSet, IdFilter, date_range

QUEUE_FIELDS = (
    "process",
    "source_process",
    "batch_state",
    "batch_marking",
    "source_batch",
    "target_batch",
    "claimed_by",
)


class QueueFilter(FilterSet):
    application = IdFilter(field_name="process__bus_domain")
    job = IdFilter(field_name="process__parent", help_text="rows of a job's steps")
    marking = filters.CharFilter(
        field_name="batch_marking", lookup_expr="icontains", help_text="part of the marking"
    )
    inserted = date_range("insert_ts")
    started = date_range("start_ts")
    ended = date_range("end_ts")
    min_attempts = filters.NumberFilter(field_name="attempts", lookup_expr="gte")

    class Meta:
        model = BatchConsumpQueue
        fields = QUEUE_FIELDS


class ArchiveFilter(QueueFilter):
    archived = date_range("archived_ts")

    class Meta:
        model = ArchiveConsumpQueue
        fields = (*QUEUE_FIELDS, "queue_id")


class BatchFilter(FilterSet):
    application = IdFilter(field_name="bus_domain")
    source_process = IdFilter(
        field_name="source_instance_exec__process", help_text="the job whose run produced it"
    )
    created = date_range("created_ts")
    file = filters.CharFilter(
        method="with_file", help_text="part of the path of one of its files (a file name)"
    )
    table = filters.CharFilter(
        method="with_table",
        help_text="a table it has a published partition of: part of its name, or db.table",
    )

    class Meta:
        model = Batch
        fields = ("source_instance_exec", "batch_type")

    def with_file(self, rows: QuerySet[Batch], name: str, value: str) -> QuerySet[Batch]:
        # A subquery: a batch of many matching files is listed once.
        return rows.filter(pk__in=File.objects.filter(path__icontains=value).values("batch"))

    def with_table(self, rows: QuerySet[Batch], name: str, value: str) -> QuerySet[Batch]:
        named = Q(table__table_name__icontains=value)
        database, _, table = value.partition(".")
        if table:
            named |= Q(table__dbname__iexact=database, table__table_name__iexact=table)
        published = Partition.objects.filter(named, state=Partition.State.PUBLISHED)
        return rows.filter(pk__in=published.values("batch"))


class FileFilter(FilterSet):
    application = IdFilter(field_name="batch__bus_domain")
    path_contains = filters.CharFilter(field_name="path", lookup_expr="icontains")
    created = date_range("creation_ts")

    class Meta:
        model = File
        fields = ("batch", "server", "path", "file_hash")
